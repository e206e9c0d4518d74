"""Raw documents as readers yield them, and their parsing into records."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["ParseFailure", "RawDocument", "SkipReason", "parse_json_line"]


class SkipReason:
    """Names under which skipped documents are counted."""

    MALFORMED_JSON = "malformed_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_FIELD = "missing_field"
    WRONG_TYPE = "wrong_type"
    INVALID_UTF8 = "invalid_utf8"
    TRUNCATED = "truncated_file"
    EMPTY = "empty"
    FILTERED = "filtered"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    TEMPLATE_ERROR = "template_error"


class RawDocument(NamedTuple):
    """One record of a shard before parsing.

    ``cursor`` reopens the shard at this document; ``location`` names it in error messages
    (``line 12``, ``row 5``); ``payload`` is raw bytes (JSONL, plain text) or a parsed value.
    """

    cursor: int
    location: str
    payload: Any


@dataclass(frozen=True)
class ParseFailure:
    """Why a raw document could not become a record."""

    reason: str
    message: str


def parse_json_line(line: bytes) -> dict[str, Any] | ParseFailure:
    """Decode one JSONL line into a record, or say why it cannot be one."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        return ParseFailure(SkipReason.INVALID_UTF8, f"invalid UTF-8 at byte {e.start} of the line")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return ParseFailure(SkipReason.MALFORMED_JSON, f"malformed JSON: {e.msg} (column {e.colno})")
    if not isinstance(value, dict):
        return ParseFailure(
            SkipReason.NOT_AN_OBJECT, f"expected a JSON object, got {type(value).__name__}"
        )
    return value

"""Raw documents as readers yield them, and their parsing into records."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

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
    """Decode one JSONL line into a record, or say why it cannot be one.

    orjson parses first (twice as fast on long texts); the standard library decides every
    line orjson refuses and every record holding a float, so the result is always the one
    ``json.loads`` gives: orjson turns integers past 64 bits into floats and refuses lone
    surrogate escapes, NaN and the like, which ``json`` accepts.
    """
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return _parse_json_line_exactly(line)
    if not isinstance(value, dict):
        return _parse_json_line_exactly(line)
    for field in value.values():
        if not isinstance(field, str) and _holds_float(field):
            return _parse_json_line_exactly(line)
    return value


def _holds_float(value: Any) -> bool:
    stack = [value]  # no recursion: orjson reads nesting deeper than Python's recursion limit
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _parse_json_line_exactly(line: bytes) -> dict[str, Any] | ParseFailure:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        return ParseFailure(SkipReason.INVALID_UTF8, f"invalid UTF-8 at byte {e.start} of the line")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return ParseFailure(SkipReason.MALFORMED_JSON, f"malformed JSON: {e.msg} (column {e.colno})")
    except RecursionError:
        return ParseFailure(SkipReason.MALFORMED_JSON, "malformed JSON: nested deeper than Python's recursion limit")
    if not isinstance(value, dict):
        return ParseFailure(SkipReason.NOT_AN_OBJECT, f"expected a JSON object, got {type(value).__name__}")
    return value

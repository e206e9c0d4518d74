"""Reading the parts of a ``tokenizer.json``: a normalizer, pre-tokenizer or post-processor
is either one step or a ``Sequence`` of them, under a key of its own."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["TokenizerFile", "read_spec", "steps_of"]

SEQUENCE_KEYS = {"normalizer": "normalizers", "pre_tokenizer": "pretokenizers", "post_processor": "processors"}


def steps_of(spec: dict[str, Any], part: str) -> list[dict[str, Any]]:
    """The steps of ``spec[part]`` (``"normalizer"``, ``"pre_tokenizer"`` or
    ``"post_processor"``) in order: those of a ``Sequence``, the part alone, or none."""
    found = spec.get(part) or {}
    if not found:
        return []
    if found.get("type") == "Sequence":
        return list(found.get(SEQUENCE_KEYS[part]) or [])
    return [found]


def read_spec(tokenizer_json: str) -> dict[str, Any]:
    """A ``tokenizer.json`` text as JSON: by orjson, else by the standard library, which reads
    what orjson refuses (a lone surrogate escape in a vocabulary entry)."""
    spec: dict[str, Any]
    try:
        spec = orjson.loads(tokenizer_json)
    except orjson.JSONDecodeError:
        spec = json.loads(tokenizer_json)
    return spec


@dataclass
class TokenizerFile:
    """One tokenizer file as every engine candidate reads it.

    Attributes:
        serialized: Its ``tokenizer.json`` text.
        name: The tokenizer's name, for messages.
        reference: The file as ``tokenizers`` loaded it: what probes compare with.
        spec: The text parsed (read only: every candidate shares it).
        derived: What candidates read from the file once for all of them (a byte-level
            file's ranks), by name.
    """

    serialized: str
    name: str
    reference: Any
    spec: dict[str, Any]
    derived: dict[str, Any] = field(default_factory=dict)

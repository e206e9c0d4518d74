"""Reading the parts of a ``tokenizer.json``: a normalizer, pre-tokenizer or post-processor
is either one step or a ``Sequence`` of them, under a key of its own."""

from __future__ import annotations

from typing import Any

__all__ = ["steps_of"]

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

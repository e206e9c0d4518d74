"""A packed row split into its pieces, for people: where documents (or SFT examples) begin,
how many tokens each piece has and how many are trained on."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Piece", "row_pieces"]

MASK_OPEN, MASK_CLOSE = "«", "»"


@dataclass(frozen=True)
class Piece:
    """One segment of a row: a whole document or example, or part of a document."""

    segment: int
    starts_document: bool
    offset: int  # tokens of its document before it
    tokens: int
    trained: int
    text: str
    ids: list[int]

    def describe(self) -> str:
        start = "new document" if self.starts_document else f"continues a document from its token {self.offset}"
        return f"segment {self.segment}: {start}, {self.tokens} tokens, {self.trained} trained on"

    def to_json(self, *, ids: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "segment": self.segment,
            "starts_document": self.starts_document,
            "offset": self.offset,
            "tokens": self.tokens,
            "trained": self.trained,
            "text": self.text,
        }
        if ids:
            out["ids"] = self.ids
        return out


def row_pieces(
    example: dict[str, Any], decode: Callable[[Sequence[int]], str], *, max_chars: int | None = None, mask: bool = False
) -> list[Piece]:
    """The pieces of ``example`` (one row) in order. A row's first piece continues a document
    when the row starts ``token`` tokens into it. With ``mask``, text not trained on is shown
    between « and »."""
    segments = np.asarray(example["segment_ids"])
    input_ids = np.asarray(example["input_ids"])
    loss = np.asarray(example["loss_mask"])
    real = np.flatnonzero(segments > 0)
    if real.size == 0:
        return []
    values = segments[real]
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    ends = np.r_[starts[1:], values.size]
    offset = int(example.get("token", 0))
    pieces = []
    for n, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        positions = real[a:b]
        ids = input_ids[positions].tolist()
        trained = loss[positions]
        text = _masked_text(ids, trained, decode) if mask else decode(ids)
        if max_chars is not None and len(text) > max_chars:
            text = f"{text[:max_chars]}… (+{len(text) - max_chars} chars)"
        first = n == 0 and offset > 0
        pieces.append(Piece(int(values[a]), not first, offset if first else 0, len(ids), int(trained.sum()), text, ids))
    return pieces


def _masked_text(ids: list[int], trained: np.ndarray, decode: Callable[[Sequence[int]], str]) -> str:
    runs = [*np.flatnonzero(np.r_[True, trained[1:] != trained[:-1]]).tolist(), len(ids)]
    parts = []
    for a, b in itertools.pairwise(runs):
        text = decode(ids[a:b])
        parts.append(text if trained[a] else f"{MASK_OPEN}{text}{MASK_CLOSE}")
    return "".join(parts)

"""A packed row split into its pieces, for people: where documents (or SFT examples) begin,
how many tokens each piece has and how many are trained on."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Piece", "row_pieces"]

MASK_OPEN, MASK_CLOSE = "«", "»"


@dataclass(frozen=True)
class Piece:
    """One segment of a row: a whole document or example, or part of a document."""

    segment: int
    starts_document: bool | None  # None: a document, or a piece a window packer cut from one
    offset: int  # tokens of its document before it
    tokens: int
    trained: int
    text: str
    ids: list[int]

    def describe(self) -> str:
        if self.starts_document is None:
            start = "a document, or a piece of a longer one"
        else:
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
    example: dict[str, Any],
    decode: Callable[[Sequence[int]], str],
    *,
    max_chars: int | None = None,
    mask: bool = False,
    pack: Mapping[str, Any] | None = None,
) -> list[Piece]:
    """The pieces of ``example`` (one row) in order. Under a packing whose ``token`` is a token
    offset (``concat_chunk``, ``sliding_window``...), a row's first piece continues a document
    when the row starts ``token`` tokens into it; under ``pack_examples`` every piece is a whole
    example; under ``pack_documents`` (``pack``: the spec's packing, as JSON) a piece may be a
    document or part of one cut apart. With ``mask``, text not trained on is shown between «
    and »."""
    from beamtok._src.transforms.packing_modes import PACKING_MODES

    mode = PACKING_MODES.get(str(pack.get("mode"))) if pack else None
    token_offsets = mode is None or mode.ROW_TOKEN == "tokens"
    whole = mode is None or mode.WHOLE_PIECES or token_offsets
    segments = np.asarray(example["segment_ids"])
    input_ids = np.asarray(example["input_ids"])
    loss = np.asarray(example["loss_mask"])
    real = np.flatnonzero(segments > 0)
    if real.size == 0:
        return []
    values = segments[real]
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    ends = np.r_[starts[1:], values.size]
    offset = int(example.get("token", 0)) if token_offsets else 0
    pieces = []
    for n, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        positions = real[a:b]
        ids = input_ids[positions].tolist()
        trained = loss[positions]
        text = _masked_text(ids, trained, decode) if mask else decode(ids)
        if max_chars is not None and len(text) > max_chars:
            text = f"{text[:max_chars]}… (+{len(text) - max_chars} chars)"
        first = n == 0 and offset > 0
        begins: bool | None = not first if whole else None
        pieces.append(Piece(int(values[a]), begins, offset if first else 0, len(ids), int(trained.sum()), text, ids))
    return pieces


def _masked_text(ids: list[int], trained: np.ndarray, decode: Callable[[Sequence[int]], str]) -> str:
    runs = [*np.flatnonzero(np.r_[True, trained[1:] != trained[:-1]]).tolist(), len(ids)]
    parts = []
    for a, b in itertools.pairwise(runs):
        text = decode(ids[a:b])
        parts.append(text if trained[a] else f"{MASK_OPEN}{text}{MASK_CLOSE}")
    return "".join(parts)

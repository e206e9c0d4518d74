"""Packers: turn a shard's token documents into rows, pure and deterministic.

Each packer takes documents in shard order as ``add(doc, tokens, offset)``, where ``tokens``
is the whole token array of the document at doc cursor ``doc`` and ``offset`` the first
token still to pack (non-zero only when a shard is reopened mid-document), and yields
:class:`Row` objects; ``finish()`` flushes what is left at the end of the shard. A row
records the ``(doc, token)`` where it starts, so packing can restart there and reproduce
every later row exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from beamtok.spec import PackSpec

__all__ = [
    "ConcatChunker",
    "PackCounts",
    "Packer",
    "PadTruncate",
    "Row",
    "SlidingWindow",
    "WholeDocument",
    "make_packer",
]


@dataclass
class Row:
    """One packed row and where it starts."""

    doc: int
    token: int
    input_ids: np.ndarray
    segment_ids: np.ndarray
    position_ids: np.ndarray
    loss_mask: np.ndarray

    def fields(self) -> dict[str, np.ndarray]:
        return {
            "input_ids": self.input_ids,
            "segment_ids": self.segment_ids,
            "position_ids": self.position_ids,
            "loss_mask": self.loss_mask,
        }


@dataclass
class PackCounts:
    """Tokens a packer did not put into rows, and pad tokens it added."""

    truncated_tokens: int = 0
    dropped_tokens: int = 0
    pad_tokens: int = 0


class Packer(Protocol):
    counts: PackCounts

    def add(self, doc: int, tokens: np.ndarray, offset: int = 0) -> Iterator[Row]: ...

    def finish(self) -> Iterator[Row]: ...


def _single_segment(doc: int, token: int, ids: np.ndarray, loss_mask: np.ndarray | None = None) -> Row:
    n = len(ids)
    mask = np.ones(n, dtype=np.int8) if loss_mask is None else loss_mask
    return Row(doc, token, ids, np.ones(n, dtype=np.int32), np.arange(n, dtype=np.int32), mask)


def _pad_row(row: Row, seq_len: int, pad_id: int) -> Row:
    extra = seq_len - len(row.input_ids)
    if extra <= 0:
        return row
    return Row(
        row.doc,
        row.token,
        np.concatenate([row.input_ids, np.full(extra, pad_id, dtype=np.int32)]),
        np.concatenate([row.segment_ids, np.zeros(extra, dtype=np.int32)]),
        np.concatenate([row.position_ids, np.zeros(extra, dtype=np.int32)]),
        np.concatenate([row.loss_mask, np.zeros(extra, dtype=np.int8)]),
    )


class ConcatChunker:
    """Concatenate documents and cut rows of exactly ``seq_len`` tokens.

    Segment ids number the document pieces of a row from 1; position ids restart at 0 for
    each piece; padding (only in a padded last row) has segment 0 and loss mask 0.
    """

    def __init__(self, seq_len: int, pad_id: int, remainder: str = "pad") -> None:
        self.seq_len = seq_len
        self.pad_id = pad_id
        self.remainder = remainder
        self.counts = PackCounts()
        self._pieces: list[tuple[int, int, np.ndarray]] = []  # (doc, offset, tokens)
        self._buffered = 0

    def add(self, doc: int, tokens: np.ndarray, offset: int = 0) -> Iterator[Row]:
        if offset >= len(tokens):
            return
        self._pieces.append((doc, offset, tokens[offset:]))
        self._buffered += len(tokens) - offset
        while self._buffered >= self.seq_len:
            yield self._cut(self.seq_len)

    def finish(self) -> Iterator[Row]:
        if not self._buffered:
            return
        n = self._buffered
        if self.remainder == "drop":
            self.counts.dropped_tokens += n
            self._pieces, self._buffered = [], 0
            return
        row = self._cut(n)
        if self.remainder == "pad":
            self.counts.pad_tokens += self.seq_len - n
            row = _pad_row(row, self.seq_len, self.pad_id)
        yield row

    def _cut(self, n: int) -> Row:
        doc, start, _ = self._pieces[0]
        taken: list[np.ndarray] = []
        need = n
        while need:
            pdoc, poff, ptoks = self._pieces[0]
            if len(ptoks) <= need:
                taken.append(ptoks)
                need -= len(ptoks)
                self._pieces.pop(0)
            else:
                taken.append(ptoks[:need])
                self._pieces[0] = (pdoc, poff + need, ptoks[need:])
                need = 0
        self._buffered -= n
        lengths = np.fromiter((len(t) for t in taken), dtype=np.int64, count=len(taken))
        ids = np.concatenate(taken).astype(np.int32, copy=False)
        segment_ids = np.repeat(np.arange(1, len(taken) + 1, dtype=np.int32), lengths)
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        position_ids = (np.arange(n, dtype=np.int64) - starts).astype(np.int32)
        return Row(doc, start, ids, segment_ids, position_ids, np.ones(n, dtype=np.int8))


class PadTruncate:
    """One document a row: keep its first ``seq_len`` tokens, pad the rest."""

    def __init__(self, seq_len: int, pad_id: int) -> None:
        self.seq_len = seq_len
        self.pad_id = pad_id
        self.counts = PackCounts()

    def add(self, doc: int, tokens: np.ndarray, offset: int = 0) -> Iterator[Row]:
        if offset:  # rows start at token 0 only; a non-zero offset means the row was emitted
            return
        kept = tokens[: self.seq_len]
        self.counts.truncated_tokens += len(tokens) - len(kept)
        self.counts.pad_tokens += self.seq_len - len(kept)
        yield _pad_row(_single_segment(doc, 0, kept), self.seq_len, self.pad_id)

    def finish(self) -> Iterator[Row]:
        return iter(())


class SlidingWindow:
    """One document cut into windows of ``seq_len`` tokens starting every ``stride`` tokens.

    Windows after the first mask the tokens they share with the window before, so no token
    is trained on twice. The last window may be shorter.
    """

    def __init__(self, seq_len: int, stride: int) -> None:
        self.seq_len = seq_len
        self.stride = stride
        self.counts = PackCounts()

    def add(self, doc: int, tokens: np.ndarray, offset: int = 0) -> Iterator[Row]:
        n = len(tokens)
        overlap = self.seq_len - self.stride
        for start in range(offset, n, self.stride):
            ids = tokens[start : start + self.seq_len]
            mask = np.ones(len(ids), dtype=np.int8)
            if start > 0:
                mask[:overlap] = 0
            yield _single_segment(doc, start, ids, mask)
            if start + self.seq_len >= n:
                break

    def finish(self) -> Iterator[Row]:
        return iter(())


class WholeDocument:
    """One whole document a row, any length."""

    def __init__(self) -> None:
        self.counts = PackCounts()

    def add(self, doc: int, tokens: np.ndarray, offset: int = 0) -> Iterator[Row]:
        if not offset:
            yield _single_segment(doc, 0, tokens)

    def finish(self) -> Iterator[Row]:
        return iter(())


def make_packer(pack: PackSpec | None) -> Packer:
    """The packer a spec asks for (one whole document a row when it asks for none)."""
    if pack is None or pack.mode == "none":
        return WholeDocument()
    assert pack.seq_len is not None
    if pack.mode == "concat":
        return ConcatChunker(pack.seq_len, pack.pad_id, pack.remainder)
    if pack.mode == "pad":
        return PadTruncate(pack.seq_len, pack.pad_id)
    assert pack.stride is not None
    return SlidingWindow(pack.seq_len, pack.stride)

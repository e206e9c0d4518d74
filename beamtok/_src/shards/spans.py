"""Rows decoded in blocks, handed to the stream many at a time.

A backend that decodes rows column-wise (a packed cache decodes a row group at once) yields
:class:`RowSpan`\\ s instead of one ``Produced`` per example. A :class:`SpanReader` over them
gives the stream both: one ``Produced`` at a time (``next()``), or the next rows at once
(``take(n)``: a :class:`Taken` slice, which ``batch()`` stacks without making a dict per
example). Both walk the same rows with the same cursors and counts, so the two paths cannot
disagree about what comes next.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from beamtok._src.shards.items import NO_COUNTS, DocCounts, Produced, ShardCursor, with_training_fields
from beamtok._src.shards.rows import PROVENANCE

if TYPE_CHECKING:
    from beamtok._src.shards.rows import RowBlock

__all__ = ["RowSpan", "SpanReader", "Taken", "in_turns", "stack_taken"]


class RowSpan:
    """Consecutive rows of one shard (``block``), or for a shard without rows (``block`` None)
    its end cursor and document counts. The cursor after a span's last row is ``end`` when
    known, else the next span's first row, or ``done`` after the shard's last span (found when
    that row is taken, so a cache span is handed out as soon as it is decoded)."""

    __slots__ = ("block", "counts", "end")

    def __init__(self, block: RowBlock | None, end: ShardCursor | None = None, counts: DocCounts = NO_COUNTS) -> None:
        self.block = block
        self.end = end
        self.counts = counts

    def first_cursor(self) -> ShardCursor:
        block = self.block
        assert block is not None
        return ShardCursor(block.indices[0], block.docs[0], block.tokens[0])

    def last_cursor(self) -> ShardCursor:
        """The cursor after the last row of a shard ending with this span."""
        block = self.block
        assert block is not None
        return ShardCursor(block.indices[-1] + 1, 0, 0, True)

    def counts_of(self, lo: int, hi: int) -> DocCounts:
        """The document counts rows ``lo..hi-1`` carry."""
        block = self.block
        assert block is not None
        busy = block.busy
        total = NO_COUNTS
        for row in busy[bisect.bisect_left(busy, lo) : bisect.bisect_left(busy, hi)]:
            total = total + block.counts[row]
        return total


class Taken:
    """Rows ``lo..hi-1`` of a span as one piece of a batch, with the cursor after them and
    the document counts they carry."""

    __slots__ = ("block", "counts", "cursor", "hi", "lo")

    def __init__(self, block: RowBlock | None, lo: int, hi: int, cursor: ShardCursor, counts: DocCounts) -> None:
        self.block = block
        self.lo = lo
        self.hi = hi
        self.cursor = cursor
        self.counts = counts

    @property
    def rows(self) -> int:
        return self.hi - self.lo

    @property
    def width(self) -> int | None:
        return None if self.block is None else self.block.width

    def tokens(self) -> tuple[int, int] | None:
        """Real and pad tokens of these rows (tokens of rows without ``segment_ids`` are real),
        or None for rows held as examples (count them one by one)."""
        block = self.block
        if block is None or not self.rows:
            return 0, 0
        if "input_ids" not in block.stored_columns:
            return None
        return block.real_tokens(self.lo, self.hi)

    def examples(self) -> list[dict[str, Any]]:
        return [] if self.block is None else self.block.examples[self.lo : self.hi]


class SpanReader:
    """Walks a shard's spans row by row (as an iterator of ``Produced``) or many rows at a
    time (``take``)."""

    def __init__(self, spans: Iterator[RowSpan]) -> None:
        self._spans = spans
        self._span: RowSpan | None = None
        self._next: RowSpan | None = None  # the span after the current one, once looked at
        self._looked = False
        self._pos = 0

    def __iter__(self) -> SpanReader:
        return self

    def __next__(self) -> Produced:
        span, pos = self._span, self._pos
        if span is not None and span.block is not None and pos + 1 < len(span.block):
            block = span.block  # a row with its successor in the same block: the quick way
            self._pos = pos + 1
            after = ShardCursor(block.indices[pos + 1], block.docs[pos + 1], block.tokens[pos + 1])
            return Produced(block.examples[pos], after, block.counts[pos])
        taken = self.take(1)
        if taken is None:
            raise StopIteration
        example = None if taken.block is None else taken.block.examples[taken.lo]
        return Produced(example, taken.cursor, taken.counts)

    def ready(self) -> int:
        """Rows left in the block at hand: how many ``take`` gives without looking for a span."""
        span = self._span
        if span is None or span.block is None:
            return 0
        return len(span.block) - self._pos

    def take(self, limit: int) -> Taken | None:
        """Up to ``limit`` next rows of the current span (fewer where it ends), a piece with no
        rows for a shard without rows, or None after the last span."""
        while True:
            span = self._span
            if span is None:
                span = self._span = self._following()
                self._pos = 0
                if span is None:
                    return None
            block = span.block
            if block is None:
                self._span = None
                assert span.end is not None
                return Taken(None, 0, 0, span.end, span.counts)
            lo = self._pos
            if lo >= len(block):
                self._span = None
                continue
            hi = min(len(block), lo + limit)
            self._pos = hi
            if hi < len(block):
                cursor = ShardCursor(block.indices[hi], block.docs[hi], block.tokens[hi])
            elif span.end is not None:
                cursor = span.end
            else:
                following = self._peek()
                cursor = span.last_cursor() if following is None else following.first_cursor()
            return Taken(block, lo, hi, cursor, span.counts_of(lo, hi))

    def close(self) -> None:
        """Close the spans' source (its files and helper threads)."""
        close = getattr(self._spans, "close", None)
        if close is not None:
            close()

    def _peek(self) -> RowSpan | None:
        if not self._looked:
            self._next = next(self._spans, None)
            self._looked = True
        return self._next

    def _following(self) -> RowSpan | None:
        span = self._peek()
        self._next, self._looked = None, False
        return span


def in_turns(pieces: list[Taken]) -> Taken:
    """One piece of the rows of ``pieces`` taken in turns: the first row of each piece in
    order, then the second of each, and so on (the rows of shards open side by side, as
    ``interleave`` hands them out). Each piece holds as many rows as the one after it, or one
    more. The rows are copied column by column into a fresh block; the piece's cursor means
    nothing (each shard's cursor is its own piece's)."""
    from beamtok._src.shards.rows import RowBlock, TokenColumn, gather_from

    if len(pieces) == 1:
        return pieces[0]
    turns = len(pieces)
    rows = sum(p.rows for p in pieces)
    blocks = [p.block for p in pieces]
    assert all(b is not None for b in blocks) and pieces[0].rows - pieces[-1].rows in (0, 1)
    counts = pieces[0].counts
    for piece in pieces[1:]:
        counts = counts + piece.counts
    first = pieces[0].block
    assert first is not None
    widths = {b.width for b in blocks}  # type: ignore[union-attr]
    if not first.columns or widths != {first.width} or first.width is None:  # raw records, or rows of several lengths
        order = np.arange(rows)
        which = order % turns
        picked = np.array([p.lo for p in pieces], dtype=np.int64)[which] + order // turns
        return Taken(gather_from(blocks, which, picked), 0, rows, ShardCursor(), counts)  # type: ignore[arg-type]
    width = first.width
    offsets = np.arange(rows + 1, dtype=np.int64) * width
    columns = {}
    for name, column in first.columns.items():
        out = np.empty((rows, width), dtype=column.values.dtype)
        for turn, piece in enumerate(pieces):
            out[turn::turns] = piece.block.columns[name].matrix[piece.lo : piece.hi]  # type: ignore[union-attr,index]
        columns[name] = TokenColumn(out.reshape(-1), offsets, width)
    provenance = np.empty((4, rows), dtype=np.int64)
    row_counts: list[DocCounts] = [NO_COUNTS] * rows
    for turn, piece in enumerate(pieces):
        block = piece.block
        assert block is not None
        for i, values in enumerate(block.provenance):
            provenance[i, turn::turns] = values[piece.lo : piece.hi]
        for row in block.busy[bisect.bisect_left(block.busy, piece.lo) : bisect.bisect_left(block.busy, piece.hi)]:
            row_counts[turn + (row - piece.lo) * turns] = block.counts[row]
    block = RowBlock(columns, row_counts, tuple(provenance), first.supervised, fresh=True)  # type: ignore[arg-type]
    return Taken(block, 0, rows, ShardCursor(), counts)


def stack_taken(pieces: list[Taken]) -> dict[str, np.ndarray] | None:
    """The batch ``collate`` would make of these rows, stacked column-wise (writable arrays of
    their own, or views of a fresh block's rows, which nobody else reads); None unless every
    row has one length (then the caller collates their examples)."""
    first = pieces[0].block
    if first is None or first.width is None:
        return None
    if len(pieces) == 1:  # the usual batch: rows of one block, taken without a list per field
        lo, hi = pieces[0].lo, pieces[0].hi
        fresh = first.fresh
        out = {
            name: column.matrix[lo:hi] if fresh else column.matrix[lo:hi].copy()  # type: ignore[index]
            for name, column in first.columns.items()
        }
        if first.supervised:
            out = with_training_fields(out)
        for name, values in zip(PROVENANCE, first.provenance):
            part = values[lo:hi]
            out[name] = part if fresh and part.dtype == np.int64 else part.astype(np.int64)
        return out
    if any(p.block is None or p.block.width != first.width for p in pieces):
        return None
    blocks = [(p.block, p.lo, p.hi) for p in pieces]
    out = {}
    columns = [(b.columns, lo, hi) for b, lo, hi in blocks]  # type: ignore[union-attr]
    for name in columns[0][0]:
        out[name] = np.concatenate([c[name].matrix[lo:hi] for c, lo, hi in columns])  # type: ignore[index]
    if first.supervised:
        out = with_training_fields(out)
    for i, name in enumerate(PROVENANCE):
        out[name] = np.concatenate([b.provenance[i][lo:hi] for b, lo, hi in blocks]).astype(np.int64, copy=False)  # type: ignore[union-attr]
    return out

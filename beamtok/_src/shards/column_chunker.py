"""``concat_chunk``: the one packer that cuts a shard's documents into rows of ``seq_len``
tokens, many rows at a time, as row blocks.

Every place that packs ``concat_chunk`` runs it: the stream on the fly (in process and in
worker processes), the cache writer (whole shards, and the ranges of a split shard), an
unpacked cache packed as it is read, and ``verify``'s re-run; ``ShardProcessor.pack`` chooses
it. The ids of the buffered documents are joined once and the rows go out as a
:class:`~beamtok._src.shards.spans.RowSpan` that ``batch()`` stacks without a dict per row; their
segment and position ids are made from where the documents start in the block (a
:class:`~beamtok._src.shards.rows.PackedLayout`) by a few whole-array operations when first read (a
worker process sends the layout in their place).

The per-row definition it is held to lives in the tests (``tests/concat_oracle.py``, a row at
a time through the generic ``ShardPacker``): the rows, their provenance, the cursor after
each row and the document counts each row carries. Two rules make the rows equal:

- a row's cursor names where the next row starts, so a block is cut only while tokens remain
  buffered after it (with ``remainder="drop"``: a whole row's worth, since a shorter tail may
  never become a row) and the shard's last rows are cut when its documents end;
- a document's counts go with the first row whose successor starts past the document, and
  the shard's last row takes whatever is left (as ``ShardPacker`` does for the other packers).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Iterator

import numpy as np

from beamtok._src.core.spec import PackSpec
from beamtok._src.shards.items import END_OF_SHARD, NO_COUNTS, DocCounts, DocItem, ShardCursor, check_token_offset
from beamtok._src.shards.rows import PackedLayout, RowBlock, TokenColumn
from beamtok._src.shards.spans import RowSpan

__all__ = ["FIRST_ROWS", "MAX_ROWS", "ColumnChunker", "packs_column_wise"]

FIRST_ROWS = 8  # a (re)opened shard's first rows come quickly, in the blocks a worker process sends
MAX_ROWS = 64  # blocks double up to this many rows


def packs_column_wise(pack: PackSpec | None) -> bool:
    """Whether ``pack`` is one the column-wise chunker makes (``concat_chunk``)."""
    return pack is not None and pack.packing.CUTS_BY_TOKEN_OFFSET and bool(pack.seq_len)


class _Piece:
    """Buffered tokens of one document: its doc cursor, where they start in it, ids and mask."""

    __slots__ = ("doc", "ids", "mask", "offset")

    def __init__(self, doc: int, offset: int, ids: np.ndarray, mask: np.ndarray | None) -> None:
        self.doc = doc
        self.offset = offset
        self.ids = ids
        self.mask = mask


class ColumnChunker:
    """Cut one shard's documents, from ``start``, into rows of ``seq_len`` tokens, in blocks."""

    def __init__(self, shard_index: int, start: ShardCursor, pack: PackSpec, supervised: bool = False) -> None:
        assert packs_column_wise(pack) and pack.seq_len is not None
        self.shard_index = shard_index
        self.start = start
        self.seq_len = pack.seq_len
        self.pad_id = pack.pad_id
        self.remainder = pack.remainder
        self.supervised = supervised
        self._pieces: deque[_Piece] = deque()
        self._buffered = 0
        self._pending: deque[tuple[int, DocCounts]] = deque()  # (through, counts) not yet given to a row
        self._index = start.index  # the next row's index in the shard
        self._target = FIRST_ROWS

    def spans(self, docs: Iterable[DocItem]) -> Iterator[RowSpan]:
        """The shard's rows in blocks, each with the cursor after its last row."""
        keep = self.seq_len if self.remainder == "drop" else 1  # tokens that must stay buffered after a cut
        first = True
        for item in docs:
            if item.value is not None:
                if first and self.start.token:
                    check_token_offset(self.shard_index, self.start, item)
                first = False
                offset = self.start.token if item.cursor == self.start.doc else 0
                ids = item.value.ids
                if offset < len(ids):
                    mask = item.value.mask
                    self._pieces.append(
                        _Piece(item.cursor, offset, ids[offset:], None if mask is None else mask[offset:])
                    )
                    self._buffered += len(ids) - offset
            self._pending.append((item.through, item.counts))
            while self._buffered - keep >= self._target * self.seq_len:
                yield self._block(self._target, more=True)
                self._target = min(2 * self._target, MAX_ROWS)
        yield from self._finish()

    def _finish(self) -> Iterator[RowSpan]:
        full, tail = divmod(self._buffered, self.seq_len)
        if self.remainder == "drop" and tail:  # the tail stays in the buffer, unread
            self._pending.append((END_OF_SHARD, DocCounts(dropped_tokens=tail)))
        tail_row = tail > 0 and self.remainder != "drop"
        if full == 0 and not tail_row:
            yield RowSpan(None, ShardCursor(self._index, 0, 0, True), self._counts_left())
            return
        if full:
            yield self._block(full, more=tail_row)
        if tail_row:
            yield self._block(1, more=False, width=tail)

    def _block(self, rows: int, more: bool, width: int | None = None) -> RowSpan:
        """The next ``rows`` rows (of ``width`` real tokens each, ``seq_len`` unless it is the
        shard's short last row) as a span; ``more``: a row follows them in this shard."""
        width = width or self.seq_len
        shape = (rows, width)
        used = self._take(rows * width)
        lengths = [len(p.ids) for p in used]
        piece_start = np.zeros(len(used), dtype=np.int64)
        np.cumsum(lengths[:-1], out=piece_start[1:])
        row_start = np.arange(rows, dtype=np.int64) * width
        first_piece = np.searchsorted(piece_start, row_start, side="right") - 1
        ids = (
            np.concatenate([p.ids for p in used]).astype(np.int32, copy=False)
            if len(used) > 1
            else used[0].ids.astype(np.int32)
        ).reshape(shape)
        stored = [("input_ids", ids)]
        if any(p.mask is not None for p in used):
            mask = np.concatenate(
                [
                    np.ones(n, np.int8) if p.mask is None else p.mask.astype(np.int8, copy=False)
                    for p, n in zip(used, lengths)
                ]
            )
            stored.append(("loss_mask", mask.reshape(shape)))
        width_out = width
        if width != self.seq_len and self.remainder == "pad":  # the short last row, padded
            stored = [(name, self._padded(values, fill)) for (name, values), fill in zip(stored, (self.pad_id, 0))]
            width_out = self.seq_len
        docs = np.fromiter((p.doc for p in used), dtype=np.int64, count=len(used))[first_piece]
        offsets = np.fromiter((p.offset for p in used), dtype=np.int64, count=len(used))
        tokens = offsets[first_piece] + row_start - piece_start[first_piece]
        index = np.arange(self._index, self._index + rows, dtype=np.int64)
        self._index += rows
        doc_list = docs.tolist()
        if more:
            following = self._pieces[0]
            end = ShardCursor(self._index, following.doc, following.offset)
            counts = self._counts_for([*doc_list[1:], following.doc], rows)
        else:
            end = ShardCursor(self._index, 0, 0, True)
            counts = self._counts_for(doc_list[1:], rows)
            counts[-1] = counts[-1] + self._counts_left()
        offsets_out = np.arange(rows + 1, dtype=np.int64) * width_out
        shard = np.full(rows, self.shard_index, dtype=np.int64)
        real_before = np.arange(rows + 1, dtype=np.int64) * width  # every token of a row is real, its padding is not
        columns = {
            name: TokenColumn(values.reshape(-1), offsets_out, width_out) for name, values in stored
        }  # every row is width_out long
        # segment and position ids (and a pretraining row's mask) are made from the layout when read
        layout = PackedLayout(piece_start, width)
        block = RowBlock(
            columns,
            counts,
            (shard, index, docs, tokens),
            self.supervised,
            fresh=True,
            real_before=real_before,
            layout=layout,
        )
        return RowSpan(block, end)

    def _padded(self, values: np.ndarray, fill: int) -> np.ndarray:
        """The one short last row of a column padded to ``seq_len`` with ``fill``."""
        extra = self.seq_len - values.shape[1]
        return np.concatenate([values, np.full((1, extra), fill, dtype=values.dtype)], axis=1)

    def _take(self, tokens: int) -> list[_Piece]:
        """The buffer's first ``tokens`` tokens as pieces (the last one split if need be)."""
        used: list[_Piece] = []
        need = tokens
        while need:
            piece = self._pieces[0]
            n = len(piece.ids)
            if n <= need:
                used.append(self._pieces.popleft())
                need -= n
            else:
                mask = piece.mask
                used.append(_Piece(piece.doc, piece.offset, piece.ids[:need], None if mask is None else mask[:need]))
                self._pieces[0] = _Piece(
                    piece.doc, piece.offset + need, piece.ids[need:], None if mask is None else mask[need:]
                )
                need = 0
        self._buffered -= tokens
        return used

    def _counts_for(self, next_docs: list[int], rows: int) -> list[DocCounts]:
        """Each of ``rows`` rows' counts: a document's go to the first row whose successor
        starts at a later document (``next_docs``: where each row's successor starts, for
        the rows that have one)."""
        counts = [NO_COUNTS] * rows
        pending = self._pending
        while pending:
            through, item = pending[0]
            row = bisect.bisect_right(next_docs, through)
            if row >= len(next_docs):
                break
            counts[row] = counts[row] + item
            pending.popleft()
        return counts

    def _counts_left(self) -> DocCounts:
        total = NO_COUNTS
        while self._pending:
            total = total + self._pending.popleft()[1]
        return total

"""Best-fit document packing for pretraining: whole documents into rows, few cut, little padding.

``concat_chunk`` wastes no tokens but starts most rows in the middle of a document and cuts
most documents across rows. Packing whole documents keeps each one in one row, at the cost of
padding. Best-fit decreasing over a window of documents keeps that padding small: the window's
pieces go, longest first, into the open row whose free room they fill most tightly.

A document longer than a row is split into ``seq_len`` pieces (each packed like a document of
its own) or truncated to its first ``seq_len`` tokens (the rest counted as truncated tokens).
With ``bos_id`` every piece starts with that token (prepended where the piece lacks it), so
every row starts with BOS, as models trained on BOS-aligned rows expect.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from beamtok._src.transforms.pack import PackCounts, Row, TokenDoc, _join, _pad_row, _slice, check_window_offset

__all__ = ["BestFitPacker", "best_fit_bins"]


def best_fit_bins(lengths: list[int], capacity: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped into bins of ``capacity``, best-fit decreasing.

    Items go longest first (ties in index order) into the bin with the least room that holds
    them, or a new bin. Bins are returned in the order they were opened, each listing its
    items in index order.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    rooms: list[tuple[int, int]] = []  # (free room, bin), sorted: the tightest fit is a bisection away
    for i in order:
        n = lengths[i]
        k = bisect.bisect_left(rooms, (n, -1))
        if k < len(rooms):
            room, b = rooms.pop(k)
            bins[b].append(i)
            room -= n
        else:
            b, room = len(bins), capacity - n
            bins.append([i])
        if room > 0:
            bisect.insort(rooms, (room, b))
    return [sorted(members) for members in bins]


class BestFitPacker:
    """Whole documents packed best-fit decreasing within windows of ``window`` documents.

    Rows come out in the order they were opened, the pieces in a row in shard order, each its
    own segment. A row's ``(doc, token)`` is the window's first doc cursor and the row's number
    within the window, so reopening re-reads one window and skips the rows already emitted:
    the state never holds tokens.
    """

    TOKEN_OFFSETS: ClassVar[bool] = False  # ``offset`` counts rows of a window, not tokens of a document

    def __init__(
        self, seq_len: int, pad_id: int, window: int, long_docs: str = "split", bos_id: int | None = None
    ) -> None:
        self.seq_len = seq_len
        self.pad_id = pad_id
        self.window = window
        self.long_docs = long_docs
        self.bos_id = bos_id
        self.counts = PackCounts()
        self._pieces: list[TokenDoc] = []
        self._documents = 0
        self._window_doc = 0
        self._skip = 0

    def add(self, doc: int, tokens: TokenDoc, offset: int = 0) -> Iterator[Row]:
        if not self._documents:
            self._window_doc, self._skip = doc, offset
        self._documents += 1
        self._pieces.extend(self._cut(tokens))
        if self._documents >= self.window:
            yield from self._flush()

    def finish(self) -> Iterator[Row]:
        yield from self._flush()

    def _cut(self, tokens: TokenDoc) -> list[TokenDoc]:
        """The pieces of one document, each at most ``seq_len`` tokens."""
        n = len(tokens.ids)
        if not n:
            return []
        bos = self.bos_id
        begins_with_bos = bos is not None and int(tokens.ids[0]) == bos
        if bos is None or begins_with_bos:
            first = self.seq_len
        else:
            first = self.seq_len - 1
        if self.long_docs == "truncate":
            self.counts.truncated_tokens += max(0, n - first)
            return [self._piece(tokens, 0, min(n, first), bos_first=bos is not None and not begins_with_bos)]
        pieces = [self._piece(tokens, 0, min(n, first), bos_first=bos is not None and not begins_with_bos)]
        step = self.seq_len if bos is None else self.seq_len - 1
        for start in range(first, n, step):
            pieces.append(self._piece(tokens, start, min(n, start + step), bos_first=bos is not None))
        return pieces

    def _piece(self, tokens: TokenDoc, start: int, stop: int, *, bos_first: bool) -> TokenDoc:
        piece = _slice(tokens, start, stop)
        if not bos_first:
            return piece
        assert self.bos_id is not None
        ids = np.concatenate([np.array([self.bos_id], dtype=piece.ids.dtype), piece.ids])
        # a prepended BOS is trained on where the document's tokens are (pretraining) and
        # left out of the loss where the document carries a mask (it is not part of it)
        mask = None if piece.mask is None else np.concatenate([np.zeros(1, dtype=piece.mask.dtype), piece.mask])
        return TokenDoc(ids, mask)

    def _flush(self) -> Iterator[Row]:
        pieces, skip, window_doc = self._pieces, self._skip, self._window_doc
        self._pieces, self._documents, self._skip = [], 0, 0
        bins = best_fit_bins([len(p.ids) for p in pieces], self.seq_len)
        check_window_offset(skip, len(bins), window_doc)
        for number, members in enumerate(bins):
            if number < skip:
                continue
            row = _join(window_doc, number, [pieces[i] for i in members])
            self.counts.pad_tokens += self.seq_len - len(row.input_ids)
            yield _pad_row(row, self.seq_len, self.pad_id)

"""Packers: turn a shard's token documents into rows, pure and deterministic.

Each packer takes documents in shard order as ``add(doc, tokens, offset)``: ``tokens`` is the
document at doc cursor ``doc`` (a :class:`TokenDoc`: ids and an optional loss mask) and
``offset`` says where to restart inside it when a shard is reopened mid-document (for the
whole-example packers: how many rows of the packing window starting there were already
emitted). ``finish()`` flushes what is left at the end of the shard. A row records the
``(doc, token)`` where it starts, so packing can restart there and reproduce every later row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from beamtok._src.base.errors import StateError
from beamtok._src.transforms.sft import TokenDoc

if TYPE_CHECKING:
    pass

__all__ = [
    "FirstFitPacker",
    "GreedyPacker",
    "PackCounts",
    "Packer",
    "PadTruncate",
    "Row",
    "SlidingWindow",
    "TokenDoc",
    "WholeDocument",
]


@dataclass
class Row:
    """One packed row and where it starts.

    Attributes:
        doc: The index of the row's first document in its shard.
        token: The token of that document the row starts at.
        input_ids: The row's token ids.
        segment_ids: Which document piece each token is of (1, 2...; 0: padding).
        position_ids: Each token's position in its piece.
        loss_mask: 1 where the token is trained on.
    """

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
    """Tokens a packer did not put into rows, pad tokens it added, and whole examples it
    skipped because they cannot fit a row (``too_long``)."""

    truncated_tokens: int = 0
    dropped_tokens: int = 0
    pad_tokens: int = 0
    too_long: int = 0


class Packer(Protocol):
    """Rows made of documents' tokens, one document at a time, then what is left at the end.

    ``TOKEN_OFFSETS`` says what the ``offset`` of :meth:`add` counts: tokens of the document
    (True: a resume may start inside a document, and the offset is checked against it), or
    rows of a packing window (False: the windowed packers)."""

    TOKEN_OFFSETS: ClassVar[bool]
    counts: PackCounts

    def add(self, doc: int, tokens: TokenDoc, offset: int = 0) -> Iterator[Row]:
        """The rows the next document completes.

        Args:
            doc: The document's index in its shard.
            tokens: Its token ids (and loss mask).
            offset: Where a resume starts in it (see ``TOKEN_OFFSETS``).
        """
        ...

    def finish(self) -> Iterator[Row]:
        """The rows still held at the end of the shard."""
        ...


def _mask_of(tokens: TokenDoc) -> np.ndarray:
    return tokens.mask if tokens.mask is not None else np.ones(len(tokens.ids), dtype=np.int8)


def _join(doc: int, token: int, pieces: list[TokenDoc]) -> Row:
    """One row of several document pieces: segments from 1, positions restarting per piece."""
    if len(pieces) == 1:  # most rows of long documents: the same arrays, a third of the calls
        (piece,) = pieces
        n = len(piece.ids)
        return Row(doc, token, piece.ids.astype(np.int32), _ones(n), _positions(n).copy(), _mask_copy(piece, n))
    n = sum(len(p.ids) for p in pieces)
    ids = np.empty(n, dtype=np.int32)
    segment_ids = np.empty(n, dtype=np.int32)
    position_ids = np.empty(n, dtype=np.int32)
    masked = any(p.mask is not None for p in pieces)
    mask = np.empty(n, dtype=np.int8) if masked else _ones(n, np.int8)
    start = 0
    for number, piece in enumerate(pieces, 1):  # slice assignment: fewer numpy calls than repeat/cumsum
        stop = start + len(piece.ids)
        ids[start:stop] = piece.ids
        segment_ids[start:stop] = number
        position_ids[start:stop] = _positions(stop - start)
        if masked:
            mask[start:stop] = 1 if piece.mask is None else piece.mask
        start = stop
    return Row(doc, token, ids, segment_ids, position_ids, mask)


_POSITIONS = np.arange(0, dtype=np.int32)


def _positions(n: int) -> np.ndarray:
    """A read-only view of ``0..n-1`` (copy it before handing it out)."""
    global _POSITIONS
    if len(_POSITIONS) < n:
        _POSITIONS = np.arange(max(n, 2 * len(_POSITIONS)), dtype=np.int32)
        _POSITIONS.flags.writeable = False
    return _POSITIONS[:n]


def _ones(n: int, dtype: type = np.int32) -> np.ndarray:
    out: np.ndarray = np.empty(n, dtype=dtype)
    out.fill(1)
    return out


def _mask_copy(piece: TokenDoc, n: int) -> np.ndarray:
    return piece.mask.astype(np.int8) if piece.mask is not None else _ones(n, np.int8)


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


def check_window_offset(skip: int, rows: int, doc: int) -> None:
    """A window packer's restart offset must name a row the window makes."""
    if skip and skip >= rows:
        raise StateError(
            f"the cursor names row {skip} of the packing window starting at document {doc}, which makes {rows} row(s); "
            "the state does not match this data"
        )


def _slice(tokens: TokenDoc, start: int, stop: int | None = None) -> TokenDoc:
    return TokenDoc(tokens.ids[start:stop], tokens.mask[start:stop] if tokens.mask is not None else None)


class PadTruncate:
    """One document a row: keep its first ``seq_len`` tokens, pad the rest."""

    TOKEN_OFFSETS: ClassVar[bool] = True

    def __init__(self, seq_len: int, pad_id: int) -> None:
        """A packer with nothing counted yet.

        Args:
            seq_len: The row length.
            pad_id: The id that fills a short document's row.
        """
        self.seq_len = seq_len
        self.pad_id = pad_id
        self.counts = PackCounts()

    def add(self, doc: int, tokens: TokenDoc, offset: int = 0) -> Iterator[Row]:
        """The document's one row (none when resuming past its start).

        Args:
            doc: The document's index in its shard.
            tokens: Its tokens; those past ``seq_len`` are counted as truncated.
            offset: A resume's token offset: anything but 0 means the row was given before.
        """
        if offset:  # rows start at token 0 only; a non-zero offset means the row was emitted
            return
        kept = _slice(tokens, 0, self.seq_len)
        self.counts.truncated_tokens += len(tokens.ids) - len(kept.ids)
        self.counts.pad_tokens += self.seq_len - len(kept.ids)
        yield _pad_row(_join(doc, 0, [kept]), self.seq_len, self.pad_id)

    def finish(self) -> Iterator[Row]:
        return iter(())


class SlidingWindow:
    """One document cut into windows of ``seq_len`` tokens starting every ``stride`` tokens.

    Windows after the first mask the tokens they share with the window before, so no token
    is trained on twice. The last window may be shorter.
    """

    TOKEN_OFFSETS: ClassVar[bool] = True

    def __init__(self, seq_len: int, stride: int) -> None:
        """A packer with nothing counted yet.

        Args:
            seq_len: The window length.
            stride: Tokens from one window's start to the next's.
        """
        self.seq_len = seq_len
        self.stride = stride
        self.counts = PackCounts()

    def add(self, doc: int, tokens: TokenDoc, offset: int = 0) -> Iterator[Row]:
        """The document's windows, the first starting at ``offset``.

        Args:
            doc: The document's index in its shard.
            tokens: Its tokens and loss mask.
            offset: The first window's start (a resume's; a multiple of the stride).
        """
        n = len(tokens.ids)
        overlap = self.seq_len - self.stride
        for start in range(offset, n, self.stride):
            window = _slice(tokens, start, start + self.seq_len)
            mask = _mask_of(window).copy()
            if start > 0:
                mask[:overlap] = 0
            yield _join(doc, start, [TokenDoc(window.ids, mask)])
            if start + self.seq_len >= n:
                break

    def finish(self) -> Iterator[Row]:
        return iter(())


class WholeDocument:
    """One whole document a row, any length."""

    TOKEN_OFFSETS: ClassVar[bool] = True

    def __init__(self) -> None:
        self.counts = PackCounts()

    def add(self, doc: int, tokens: TokenDoc, offset: int = 0) -> Iterator[Row]:
        """The whole document as one row.

        Args:
            doc: The document's index in its shard.
            tokens: All of its tokens.
            offset: Anything but 0: a resume past this row, which gives nothing.
        """
        if not offset:
            yield _join(doc, 0, [tokens])

    def finish(self) -> Iterator[Row]:
        return iter(())


class GreedyPacker:
    """Whole examples, in order, into rows of ``seq_len``: a row is closed (and padded) when
    the next example does not fit. No example is ever split; each is its own segment."""

    TOKEN_OFFSETS: ClassVar[bool] = True

    def __init__(self, seq_len: int, pad_id: int) -> None:
        self.seq_len = seq_len
        self.pad_id = pad_id
        self.counts = PackCounts()
        self._row: list[TokenDoc] = []
        self._row_doc = 0
        self._used = 0

    def add(self, doc: int, tokens: TokenDoc, offset: int = 0) -> Iterator[Row]:
        if len(tokens.ids) > self.seq_len:  # never split: skipped, and counted as too_long
            self.counts.too_long += 1
            return
        if self._row and self._used + len(tokens.ids) > self.seq_len:
            yield self._close()
        if not self._row:
            self._row_doc = doc
        self._row.append(tokens)
        self._used += len(tokens.ids)

    def finish(self) -> Iterator[Row]:
        if self._row:
            yield self._close()

    def _close(self) -> Row:
        self.counts.pad_tokens += self.seq_len - self._used
        row = _pad_row(_join(self._row_doc, 0, self._row), self.seq_len, self.pad_id)
        self._row, self._used = [], 0
        return row


class FirstFitPacker:
    """Whole examples packed first-fit-decreasing within windows of ``window`` examples.

    Each window's examples go, longest first, into the first row with room; rows come out in
    the order they were opened, examples within a row in shard order. A row's ``(doc, token)``
    is the window's first doc cursor and the row's number within the window, so reopening
    re-reads one window and skips the rows already emitted: the state never holds tokens.
    """

    TOKEN_OFFSETS: ClassVar[bool] = False  # ``offset`` counts rows of a window, not tokens of a document

    def __init__(self, seq_len: int, pad_id: int, window: int) -> None:
        self.seq_len = seq_len
        self.pad_id = pad_id
        self.window = window
        self.counts = PackCounts()
        self._examples: list[TokenDoc] = []
        self._window_doc = 0
        self._skip = 0

    def add(self, doc: int, tokens: TokenDoc, offset: int = 0) -> Iterator[Row]:
        if len(tokens.ids) > self.seq_len:  # never split: skipped, and counted as too_long
            self.counts.too_long += 1
            return
        if not self._examples:
            self._window_doc, self._skip = doc, offset
        self._examples.append(tokens)
        if len(self._examples) >= self.window:
            yield from self._flush()

    def finish(self) -> Iterator[Row]:
        yield from self._flush()

    def _flush(self) -> Iterator[Row]:
        order = sorted(range(len(self._examples)), key=lambda i: (-len(self._examples[i].ids), i))
        bins: list[list[int]] = []
        room: list[int] = []
        for i in order:
            n = len(self._examples[i].ids)
            for b, free in enumerate(room):
                if n <= free:
                    bins[b].append(i)
                    room[b] -= n
                    break
            else:
                bins.append([i])
                room.append(self.seq_len - n)
        check_window_offset(self._skip, len(bins), self._window_doc)
        for number, members in enumerate(bins):
            if number < self._skip:
                continue
            self.counts.pad_tokens += room[number]
            pieces = [self._examples[i] for i in sorted(members)]
            yield _pad_row(_join(self._window_doc, number, pieces), self.seq_len, self.pad_id)
        self._examples, self._skip = [], 0

"""Consecutive examples of one shard in column form: what a cache row group decodes to, and
what a tokenization worker process sends back, so neither builds nor pickles a dict per
example. Examples (dicts of row views) are made only when asked for; ``batch()`` stacks the
columns directly (see ``beamtok._src.shards.spans``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from beamtok._src.shards.items import DocCounts, with_training_fields

__all__ = [
    "PROVENANCE",
    "PackedLayout",
    "RowBlock",
    "TokenColumn",
    "columns_of",
    "gather_from",
    "gather_rows",
    "row_offsets",
]

PROVENANCE = ("shard", "index", "doc", "token")


@dataclass(frozen=True)
class TokenColumn:
    """One token field of consecutive rows: flat values, row offsets, and the common row
    length when every row has it (then ``matrix`` is a 2-D view)."""

    values: np.ndarray
    offsets: np.ndarray
    width: int | None
    matrix: np.ndarray | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        matrix = None if self.width is None else self.values.reshape(-1, self.width)
        object.__setattr__(self, "matrix", matrix)

    @classmethod
    def of(cls, values: np.ndarray, offsets: np.ndarray) -> TokenColumn:
        rows = len(offsets) - 1
        width = int(offsets[1] - offsets[0]) if rows else 0
        even = (
            rows > 0
            and width > 0
            and offsets[0] == 0
            and len(values) == width * rows
            and bool((np.diff(offsets) == width).all())
        )
        return cls(values, offsets, width if even else None)

    def rows(self) -> list[np.ndarray]:
        matrix = self.matrix
        if matrix is not None:
            return list(matrix)
        values = self.values
        return [values[a:b] for a, b in itertools.pairwise(self.offsets.tolist())]


@dataclass(frozen=True)
class PackedLayout:
    """Where the documents lie in a block of rows cut from documents laid end to end
    (``concat_chunk``): ``starts``, the offset of each document's piece among the block's real
    tokens counted row after row (the first is 0), and ``width``, the real tokens of a row.
    A row's segment ids start at 1 and rise by one where a document starts inside it; its
    position ids count from each segment's start; a pretraining row's loss mask is 1 on real
    tokens. All three follow from the layout, so a block keeps it in their place until they
    are read, and a worker process sends it instead of them."""

    starts: np.ndarray
    width: int

    def segments(self, rows: int, width_out: int) -> np.ndarray:
        """Segment ids (int32), ``rows`` x ``width_out``: 1 from each row's start, one more
        from each document starting inside it, 0 on the padding past ``width`` (a short last
        row's). What a cache file stores of the layout."""
        width = self.width
        segments = np.ones((rows, width_out), dtype=np.int32)
        segments[:, width:] = 0
        for start in self.starts[1:].tolist():
            row, column = divmod(start, width)
            if column:
                segments[row, column:width] += 1
        return segments

    def segments_and_positions(self, rows: int, width_out: int) -> tuple[np.ndarray, np.ndarray]:
        """Segment and position ids (int32), ``rows`` x ``width_out``; the padding past
        ``width`` (a short last row's) gets 0."""
        width = self.width
        segments = self.segments(rows, width_out)
        counting = np.arange(width, dtype=np.int32)
        positions = np.zeros((rows, width_out), dtype=np.int32)
        positions[:, :width] = counting
        # most rows lie inside one document; a document starting inside a row restarts the
        # positions from there on
        for start in self.starts[1:].tolist():
            row, column = divmod(start, width)
            if column:
                positions[row, column:width] = counting[: width - column]
        return segments, positions

    def real_mask(self, rows: int, width_out: int) -> np.ndarray:
        """1 (int8) on each row's real tokens, 0 on its padding."""
        mask = np.ones((rows, width_out), dtype=np.int8)
        mask[:, self.width :] = 0
        return mask


def row_offsets(rows: list[np.ndarray]) -> np.ndarray:
    """Where each row starts in the rows' concatenation, and the end (int64)."""
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows)), out=offsets[1:])
    return offsets


def columns_of(fields: list[tuple[str, np.ndarray]], offsets: np.ndarray) -> dict[str, TokenColumn]:
    """Token columns sharing one set of row offsets (the common row length found once)."""
    columns: dict[str, TokenColumn] = {}
    width: int | None = None
    for name, values in fields:
        column = TokenColumn.of(values, offsets) if not columns else TokenColumn(values, offsets, width)
        width = column.width
        columns[name] = column
    return columns


class RowBlock:
    """Consecutive examples of one shard, column-wise: array fields (``columns``, in the
    examples' key order), document counts per row, provenance. ``supervised`` adds
    ``labels`` and ``attention_mask`` to each example as the shard processing does (for cache
    rows, which do not store them). A block of examples that are not token rows (raw records)
    holds the examples themselves and no columns. A ``fresh`` block was made for one reader
    and its rows are handed out once (rows packed now, or received from a worker process), so
    batches may be views of it; a cache's decoded or memory-mapped rows are never fresh. A
    block of packed rows with a ``layout`` stores only ``input_ids`` (and a loss mask that came
    with the documents): its segment and position ids (and the mask of real tokens) are made
    from the layout when ``columns`` is first read."""

    def __init__(
        self,
        columns: dict[str, TokenColumn],
        counts: list[DocCounts],
        provenance: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        supervised: bool,
        examples: list[dict[str, Any]] | None = None,
        busy: list[int] | None = None,
        fresh: bool = False,
        real_before: np.ndarray | None = None,
        layout: PackedLayout | None = None,
    ) -> None:
        self.stored_columns = columns
        self.layout = layout
        self._columns = columns if layout is None else None
        self.fresh = fresh
        self.counts = counts
        # the rows whose counts are not empty, in order (found from counts unless the caller has them)
        self.busy = busy if busy is not None else [i for i, c in enumerate(counts) if c]
        self.shard, self.index_array, self.doc_array, self.token_array = provenance
        self.indices: list[int] = self.index_array.tolist()
        self.docs: list[int] = self.doc_array.tolist()
        self.tokens: list[int] = self.token_array.tolist()
        self.supervised = supervised
        self._examples = examples
        self._real_before = real_before  # the real tokens before each row, where the maker knows them

    @classmethod
    def of_examples(cls, examples: list[dict[str, Any]], counts: list[DocCounts]) -> RowBlock:
        """Examples as they are (raw records, or fields a block cannot hold)."""
        provenance = tuple(np.array([ex[name] for ex in examples], dtype=np.int64) for name in PROVENANCE)
        return cls({}, counts, provenance, False, examples)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def provenance(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each row's shard, index, doc and token arrays, in ``PROVENANCE`` order."""
        return self.shard, self.index_array, self.doc_array, self.token_array

    @property
    def columns(self) -> dict[str, TokenColumn]:
        """Every token field, in the examples' key order."""
        if self._columns is None:
            self._columns = self._laid_out()
        return self._columns

    def _laid_out(self) -> dict[str, TokenColumn]:
        """The stored columns with those the layout makes, in the packer's field order."""
        layout, ids = self.layout, self.stored_columns["input_ids"]
        assert layout is not None and ids.width is not None
        rows, width_out = len(ids.offsets) - 1, ids.width
        segments, positions = layout.segments_and_positions(rows, width_out)
        mask = self.stored_columns.get("loss_mask")
        if mask is None:
            mask = TokenColumn(layout.real_mask(rows, width_out).reshape(-1), ids.offsets, width_out)
        made = {"segment_ids": segments, "position_ids": positions}
        return {
            "input_ids": ids,
            **{name: TokenColumn(values.reshape(-1), ids.offsets, width_out) for name, values in made.items()},
            "loss_mask": mask,
        }

    def file_columns(self) -> tuple[TokenColumn, TokenColumn, TokenColumn | None, TokenColumn | None]:
        """The token columns a cache file is made from: ``input_ids``, ``segment_ids``,
        ``position_ids`` (to be checked against the segments) and the loss mask. A packed
        block's segments come from its layout with no positions (they follow from the segments
        by construction, and a cache derives them when read) and its mask is None when it is
        the real tokens (the file stores none then)."""
        if self._columns is not None or self.layout is None:
            columns = self.columns
            return columns["input_ids"], columns["segment_ids"], columns["position_ids"], columns["loss_mask"]
        ids = self.stored_columns["input_ids"]
        assert ids.width is not None
        segments = self.layout.segments(len(ids.offsets) - 1, ids.width)
        return (
            ids,
            TokenColumn(segments.reshape(-1), ids.offsets, ids.width),
            None,
            self.stored_columns.get("loss_mask"),
        )

    @property
    def examples(self) -> list[dict[str, Any]]:
        if self._examples is None:
            names = list(self.columns)
            rows = [self.columns[name].rows() for name in names]
            shard = self.shard.tolist()
            examples = []
            for i, fields in enumerate(zip(*rows)):
                example = dict(zip(names, fields))
                if self.supervised:
                    example = with_training_fields(example)
                example["shard"] = shard[i]
                example["index"] = self.indices[i]
                example["doc"] = self.docs[i]
                example["token"] = self.tokens[i]
                examples.append(example)
            self._examples = examples
        return self._examples

    @property
    def width(self) -> int | None:
        """The common length of every row, or None when rows differ (or are not token rows)."""
        column = self.stored_columns.get("input_ids")
        return None if column is None else column.width

    def real_tokens(self, lo: int, hi: int) -> tuple[int, int]:
        """Real and pad tokens of rows ``lo..hi-1`` (pad tokens have segment 0; rows without
        ``segment_ids`` are all real). Counted once per block (see :meth:`count_tokens`)."""
        before = self.count_tokens()
        column = self.stored_columns["input_ids"]
        real = int(before[hi] - before[lo])
        return real, int(column.offsets[hi] - column.offsets[lo]) - real

    def count_tokens(self) -> np.ndarray:
        """The real tokens before each row, and in all (a decoding thread calls this early)."""
        if self._real_before is None:
            segments = self.columns.get("segment_ids")
            offsets = self.stored_columns["input_ids"].offsets
            before = np.zeros(len(offsets), dtype=np.int64)
            if segments is None:
                before[:] = offsets
            elif segments.matrix is not None:
                np.cumsum(np.count_nonzero(segments.matrix, axis=1), out=before[1:])
            else:
                real = np.concatenate([[0], np.cumsum(segments.values != 0, dtype=np.int64)])
                before[:] = real[offsets - offsets[0]]
            self._real_before = before
        return self._real_before

    def nbytes(self) -> int:
        return sum(c.values.nbytes for c in self.columns.values())


def gather_rows(picks: list[tuple[RowBlock, int]]) -> RowBlock:
    """One block of the rows ``(block, row)``, in the order given (a global shuffle's rows
    from the row groups that hold them)."""
    numbers: dict[int, int] = {}
    blocks: list[RowBlock] = []
    which = np.empty(len(picks), dtype=np.int64)
    for i, (block, _) in enumerate(picks):
        number = numbers.get(id(block))
        if number is None:
            number = numbers[id(block)] = len(blocks)
            blocks.append(block)
        which[i] = number
    return gather_from(blocks, which, np.fromiter((row for _, row in picks), dtype=np.int64, count=len(picks)))


def gather_from(blocks: list[RowBlock], which: np.ndarray, rows: np.ndarray) -> RowBlock:
    """One block of row ``rows[i]`` of ``blocks[which[i]]`` for each ``i``, in that order: a
    copy per block and column (fancy indexing), or per row where blocks give a few rows each.
    The block is fresh (its arrays are its own), so batches of its rows may be views of it."""
    first = blocks[0]
    pairs = list(zip(which.tolist(), rows.tolist()))
    counts = [blocks[b].counts[r] for b, r in pairs]
    if not first.columns:
        return RowBlock.of_examples([blocks[b].examples[r] for b, r in pairs], counts)
    by_block = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[by_block], np.arange(len(blocks) + 1))
    chosen = [(b, by_block[bounds[b] : bounds[b + 1]]) for b in range(len(blocks))]
    widths = {next(iter(block.columns.values())).width for block in blocks}
    width = widths.pop() if len(widths) == 1 else None
    fields = []
    if width is not None:  # rows of one length (packed rows): whole-row copies
        offsets = np.arange(len(rows) + 1, dtype=np.int64) * width
        for name, column in first.columns.items():
            matrices = [block.columns[name].matrix for block in blocks]
            if 4 * len(blocks) > len(rows):  # a few rows a block: a copy per row is cheaper
                fields.append((name, np.concatenate([matrices[b][r] for b, r in pairs])))
                continue
            out = np.empty((len(rows), width), dtype=column.values.dtype)
            for b, where in chosen:
                out[where] = matrices[b][rows[where]]  # type: ignore[index]
            fields.append((name, out.reshape(-1)))
    else:
        starts = np.empty(len(rows), dtype=np.int64)
        lengths = np.empty(len(rows), dtype=np.int64)
        for b, where in chosen:
            row_offsets = next(iter(blocks[b].columns.values())).offsets
            starts[where] = row_offsets[rows[where]]
            lengths[where] = row_offsets[rows[where] + 1] - starts[where]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        spans = [
            (b, _spans(offsets[where], lengths[where]), _spans(starts[where], lengths[where])) for b, where in chosen
        ]
        for name, column in first.columns.items():
            out = np.empty(int(offsets[-1]), dtype=column.values.dtype)
            for b, into, taken in spans:
                out[into] = blocks[b].columns[name].values[taken]
            fields.append((name, out))
    provenance = []
    for i in range(len(PROVENANCE)):
        values = np.empty(len(rows), dtype=np.int64)
        for b, where in chosen:
            values[where] = blocks[b].provenance[i][rows[where]]
        provenance.append(values)
    return RowBlock(columns_of(fields, offsets), counts, tuple(provenance), first.supervised, fresh=True)  # type: ignore[arg-type]


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. starts[i] + lengths[i] - 1`` for every ``i``, concatenated."""
    before = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=before[1:])
    return np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)

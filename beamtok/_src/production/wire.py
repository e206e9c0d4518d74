"""Examples shipped between processes in column blocks, not one pickled dict per example.

A tokenization worker groups the ``Produced`` items of a shard into :class:`RowSpan`\\ s (the
examples' array fields concatenated per field, provenance as arrays, document counts only
where a row carries some) and sends each as plain arrays; the consumer rebuilds the span
without copying the arrays again. Chunks start small, so a (re)opened shard's first example
arrives quickly, and double up to ``MAX_ROWS`` rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from beamtok._src.shards.items import NO_COUNTS, DocCounts, Produced, ShardCursor
from beamtok._src.shards.rows import PROVENANCE, PackedLayout, RowBlock, columns_of, row_offsets
from beamtok._src.shards.spans import RowSpan

__all__ = ["FIRST_ROWS", "MAX_ROWS", "span_from_wire", "span_to_wire", "spans_of"]

FIRST_ROWS = 8
MAX_ROWS = 256


def spans_of(produced: Iterable[Produced]) -> Iterator[RowSpan]:
    """Group a shard's outputs (from its start cursor or any other) into spans."""
    chunk: list[Produced] = []
    size = FIRST_ROWS
    for item in produced:
        if item.example is None:  # the one output of a shard without examples
            yield RowSpan(None, item.cursor, item.counts)
            continue
        chunk.append(item)
        if len(chunk) >= size:
            yield _span(chunk)
            chunk = []
            size = min(2 * size, MAX_ROWS)
    if chunk:
        yield _span(chunk)


def _span(chunk: list[Produced]) -> RowSpan:
    examples = [p.example for p in chunk]
    counts = [p.counts for p in chunk]
    return RowSpan(_block(examples, counts), chunk[-1].cursor)  # type: ignore[arg-type]


def _block(examples: list[dict[str, Any]], counts: list[DocCounts]) -> RowBlock:
    """The examples as columns, or as they are when their fields do not line up."""
    first = examples[0]
    names = [k for k, v in first.items() if isinstance(v, np.ndarray)]
    if not names or [k for k in first if k not in names] != list(PROVENANCE):
        return RowBlock.of_examples(examples, counts)
    keys = list(first)
    dtypes = [first[name].dtype for name in names]
    for ex in examples:
        if list(ex) != keys:
            return RowBlock.of_examples(examples, counts)
        n = len(ex[names[0]])
        for name, dtype in zip(names, dtypes):
            value = ex[name]
            if value.ndim != 1 or len(value) != n or value.dtype != dtype:
                return RowBlock.of_examples(examples, counts)
    offsets = row_offsets([ex[names[0]] for ex in examples])
    columns = columns_of([(name, np.concatenate([ex[name] for ex in examples])) for name in names], offsets)
    provenance = tuple(np.array([ex[name] for ex in examples], dtype=np.int64) for name in PROVENANCE)
    return RowBlock(columns, counts, provenance, False)  # type: ignore[arg-type]


def span_to_wire(span: RowSpan) -> tuple[Any, ...]:
    """A span as plain values (arrays, ints, a few counts) for a process queue."""
    end = span.end
    assert end is not None
    cursor = (end.index, end.doc, end.token, end.done)
    block = span.block
    if block is None:
        return ("empty", cursor, span.counts)
    rows = {i: block.counts[i] for i in block.busy}
    stored = block.stored_columns
    if not stored:
        return ("examples", cursor, block.examples, rows)
    first = next(iter(stored.values()))
    fields = _packed_fields([(name, column.values) for name, column in stored.items()])
    provenance = block.provenance
    layout = block.layout  # packed rows: the layout travels instead of the columns it makes
    laid_out = None if layout is None else (layout.starts, layout.width)
    return (
        "columns",
        cursor,
        fields,
        first.offsets,
        provenance,
        rows,
        block.count_tokens(),
        laid_out,
        block.supervised,
    )


def span_from_wire(wire: tuple[Any, ...]) -> RowSpan:
    kind, cursor = wire[0], ShardCursor(*wire[1])
    if kind == "empty":
        return RowSpan(None, cursor, wire[2])
    if kind == "examples":
        examples, rows = wire[2], wire[3]
        return RowSpan(RowBlock.of_examples(examples, [rows.get(i, NO_COUNTS) for i in range(len(examples))]), cursor)
    fields, offsets, provenance, rows, real_before = _unpacked_fields(wire[2]), wire[3], wire[4], wire[5], wire[6]
    counts = [NO_COUNTS] * (len(offsets) - 1)
    for i, c in rows.items():
        counts[i] = c
    layout = None if wire[7] is None else PackedLayout(*wire[7])
    supervised = wire[8]  # batches of SFT rows get labels and attention_mask
    block = RowBlock(
        columns_of(fields, offsets),
        counts,
        provenance,
        supervised,
        busy=sorted(rows),
        fresh=True,
        real_before=real_before,
        layout=layout,
    )
    return RowSpan(block, cursor)


# Fewer bytes through the pipe: integer fields travel in the narrowest type that holds their
# values (GPT-2 ids, positions and segment ids fit 16 bits or less), and a loss mask that is
# exactly the real tokens (every pretraining row) not at all. The consumer restores them.
_NARROW = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int8), np.dtype(np.int16))


def _packed_fields(fields: list[tuple[str, np.ndarray]]) -> list[tuple[str, np.ndarray | None, str]]:
    segments = dict(fields).get("segment_ids")
    packed: list[tuple[str, np.ndarray | None, str]] = []
    for name, values in fields:
        dtype = values.dtype
        if name == "loss_mask" and segments is not None and np.array_equal(values, segments > 0):
            packed.append((name, None, dtype.str))
            continue
        if dtype.kind in "iu" and dtype.itemsize > 1 and len(values):
            lo, hi = int(values.min()), int(values.max())
            narrow = next(
                (t for t in _NARROW if t.itemsize < dtype.itemsize and np.iinfo(t).min <= lo and hi <= np.iinfo(t).max),
                None,
            )
            if narrow is not None:
                values = values.astype(narrow)
        packed.append((name, values, dtype.str))
    return packed


def _unpacked_fields(packed: list[tuple[str, np.ndarray | None, str]]) -> list[tuple[str, np.ndarray]]:
    restored = {name: values.astype(dtype, copy=False) for name, values, dtype in packed if values is not None}
    fields = []
    for name, values, dtype in packed:
        if values is None:
            values = (restored["segment_ids"] > 0).astype(dtype)
        fields.append((name, restored.get(name, values)))
    return fields

"""The Parquet schema of a cache shard, and conversion between examples and Arrow.

Columns: the example's token fields as lists (``input_ids`` int32, ``segment_ids`` int32,
``position_ids`` int32, ``loss_mask`` int8), its provenance (``shard``, ``index``, ``doc``,
``token``), and ``doc_counts``: the documents the stream finished with this example (what
``stats()`` adds up), so a cache stream reports the same counts as the on-the-fly one.
Conversions go column-wise through numpy: no per-token Python work.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from beamtok.shard import NO_COUNTS, DocCounts, with_training_fields

__all__ = ["TOKEN_FIELDS", "RowBlock", "batch_to_examples", "cache_schema", "examples_to_table"]

TOKEN_FIELDS: dict[str, pa.DataType] = {
    "input_ids": pa.int32(),
    "segment_ids": pa.int32(),
    "position_ids": pa.int32(),
    "loss_mask": pa.int8(),
}
PROVENANCE_FIELDS: dict[str, pa.DataType] = {"shard": pa.int32(), "index": pa.int64(), "doc": pa.int64(), "token": pa.int64()}
COUNTS_TYPE = pa.struct(
    [
        ("read", pa.int32()),
        ("emitted", pa.int32()),
        ("skipped", pa.string()),
        ("truncated_tokens", pa.int64()),
        ("dropped_tokens", pa.int64()),
        ("truncated_docs", pa.int32()),
    ]
)


def cache_schema() -> pa.Schema:
    fields = [pa.field(k, pa.list_(t)) for k, t in TOKEN_FIELDS.items()]
    fields += [pa.field(k, t) for k, t in PROVENANCE_FIELDS.items()]
    fields.append(pa.field("doc_counts", COUNTS_TYPE))
    return pa.schema(fields)


def _list_array(arrays: list[np.ndarray], dtype: pa.DataType) -> pa.Array:
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = np.concatenate(arrays) if arrays else np.zeros(0)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(dtype.to_pandas_dtype(), copy=False)))


def examples_to_table(examples: list[dict[str, Any]], counts: list[DocCounts]) -> pa.Table:
    """Build a cache table from examples and the document counts each one carries."""
    columns: dict[str, pa.Array] = {}
    for name, dtype in TOKEN_FIELDS.items():
        columns[name] = _list_array([ex[name] for ex in examples], dtype)
    for name, dtype in PROVENANCE_FIELDS.items():
        columns[name] = pa.array([ex[name] for ex in examples], type=dtype)
    columns["doc_counts"] = _counts_array(counts)
    return pa.table(columns, schema=cache_schema())


def _counts_array(counts: list[DocCounts]) -> pa.StructArray:
    skipped = [json.dumps(dict(sorted(c.skipped.items()))) if c.skipped else "" for c in counts]
    children = [
        pa.array([c.read for c in counts], pa.int32()),
        pa.array([c.emitted for c in counts], pa.int32()),
        pa.array(skipped, pa.string()),
        pa.array([c.truncated_tokens for c in counts], pa.int64()),
        pa.array([c.dropped_tokens for c in counts], pa.int64()),
        pa.array([c.truncated_docs for c in counts], pa.int32()),
    ]
    return pa.StructArray.from_arrays(children, fields=list(COUNTS_TYPE))


class RowBlock(NamedTuple):
    """Consecutive cache rows, decoded: examples, their document counts, their provenance."""

    examples: list[dict[str, Any]]
    counts: list[DocCounts]
    indices: list[int]
    docs: list[int]
    tokens: list[int]


def _split_list_column(column: pa.Array, dtype: np.dtype[Any]) -> list[np.ndarray]:
    offsets = column.offsets.to_numpy()
    values = column.values.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    if len(offsets) > 1 and offsets[0] == 0:
        width = int(offsets[1])
        if width and len(values) == width * (len(offsets) - 1) and (np.diff(offsets) == width).all():
            return list(values.reshape(-1, width))  # equal-length rows: views of one 2-D array
    return [values[a:b] for a, b in itertools.pairwise(offsets.tolist())]


def _counts_of(column: pa.StructArray) -> list[DocCounts]:
    """One DocCounts a row; rows that finished no document share the empty NO_COUNTS."""
    read = column.field("read").to_numpy()
    truncated = column.field("truncated_tokens").to_numpy()
    dropped = column.field("dropped_tokens").to_numpy()
    busy = np.flatnonzero((read != 0) | (truncated != 0) | (dropped != 0)).tolist()
    counts = [NO_COUNTS] * len(column)
    if busy:
        emitted = column.field("emitted").to_numpy()
        skipped = column.field("skipped").to_pylist()
        truncated_docs = column.field("truncated_docs").to_numpy()
        for i in busy:
            counts[i] = DocCounts(
                int(read[i]),
                int(emitted[i]),
                Counter(json.loads(skipped[i])) if skipped[i] else Counter(),
                int(truncated[i]),
                int(dropped[i]),
                int(truncated_docs[i]),
            )
    return counts


def batch_to_examples(batch: pa.RecordBatch, supervised: bool = False) -> RowBlock:
    """Examples (numpy fields, int provenance), their document counts and provenance from
    cache rows; ``supervised`` adds ``labels`` and ``attention_mask`` as the per-shard step does."""
    names = list(TOKEN_FIELDS)
    token_cols = [_split_list_column(batch.column(name), np.dtype(TOKEN_FIELDS[name].to_pandas_dtype())) for name in names]
    shard, index, doc, token = (batch.column(name).to_numpy().tolist() for name in PROVENANCE_FIELDS)
    examples = []
    for i, row in enumerate(zip(*token_cols)):
        fields = dict(zip(names, row))
        example = with_training_fields(fields) if supervised else fields
        example["shard"] = shard[i]
        example["index"] = index[i]
        example["doc"] = doc[i]
        example["token"] = token[i]
        examples.append(example)
    return RowBlock(examples, _counts_of(batch.column("doc_counts")), index, doc, token)

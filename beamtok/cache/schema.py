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
# the numpy dtype of each token field (pyarrow's to_pandas_dtype() would import pandas)
TOKEN_DTYPES: dict[str, np.dtype[Any]] = {name: np.dtype(str(t)) for name, t in TOKEN_FIELDS.items()}
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
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(np.dtype(str(dtype)), copy=False)))


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


def _numpy(array: pa.Array) -> np.ndarray:
    """An integer array without nulls as a zero-copy numpy view (pyarrow's ``to_numpy`` would
    import pandas, a fifth of a second at a reader's first row)."""
    if array.null_count or not pa.types.is_integer(array.type):
        return array.to_numpy(zero_copy_only=False)
    dtype = np.dtype(str(array.type))
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def _split_list_column(column: pa.Array, dtype: np.dtype[Any]) -> list[np.ndarray]:
    offsets = _numpy(column.offsets)
    values = _numpy(column.values).astype(dtype, copy=False)
    if len(offsets) > 1 and offsets[0] == 0:
        width = int(offsets[1])
        if width and len(values) == width * (len(offsets) - 1) and (np.diff(offsets) == width).all():
            return list(values.reshape(-1, width))  # equal-length rows: views of one 2-D array
    return [values[a:b] for a, b in itertools.pairwise(offsets.tolist())]


def _counts_of(column: pa.StructArray) -> list[DocCounts]:
    """One DocCounts a row; rows that finished no document share the empty NO_COUNTS."""
    read = _numpy(column.field("read"))
    truncated = _numpy(column.field("truncated_tokens"))
    dropped = _numpy(column.field("dropped_tokens"))
    busy = np.flatnonzero((read != 0) | (truncated != 0) | (dropped != 0)).tolist()
    counts = [NO_COUNTS] * len(column)
    if busy:
        emitted = _numpy(column.field("emitted"))
        skipped = column.field("skipped").to_pylist()
        truncated_docs = _numpy(column.field("truncated_docs"))
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
    token_cols = [_split_list_column(batch.column(name), TOKEN_DTYPES[name]) for name in names]
    shard, index, doc, token = (_numpy(batch.column(name)).tolist() for name in PROVENANCE_FIELDS)
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

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
from typing import Any

import numpy as np
import pyarrow as pa

from beamtok.shard import DocCounts, with_training_fields

__all__ = ["TOKEN_FIELDS", "batch_to_examples", "cache_schema", "examples_to_table"]

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
    columns["doc_counts"] = pa.array(
        [
            {
                "read": c.read,
                "emitted": c.emitted,
                "skipped": json.dumps(dict(sorted(c.skipped.items()))) if c.skipped else "",
                "truncated_tokens": c.truncated_tokens,
                "dropped_tokens": c.dropped_tokens,
                "truncated_docs": c.truncated_docs,
            }
            for c in counts
        ],
        type=COUNTS_TYPE,
    )
    return pa.table(columns, schema=cache_schema())


def _split_list_column(column: pa.Array, dtype: np.dtype[Any]) -> list[np.ndarray]:
    offsets = column.offsets.to_numpy()
    values = column.values.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    return [values[a:b] for a, b in itertools.pairwise(offsets)]


def batch_to_examples(batch: pa.RecordBatch, supervised: bool = False) -> tuple[list[dict[str, Any]], list[DocCounts]]:
    """Examples (numpy fields, int provenance) and their document counts from cache rows;
    ``supervised`` adds ``labels`` and ``attention_mask`` as the per-shard step does."""
    n = batch.num_rows
    token_cols = {
        name: _split_list_column(batch.column(name), np.dtype(dtype.to_pandas_dtype()))
        for name, dtype in TOKEN_FIELDS.items()
    }
    provenance = {name: batch.column(name).to_numpy().tolist() for name in PROVENANCE_FIELDS}
    examples = []
    for i in range(n):
        fields = {name: col[i] for name, col in token_cols.items()}
        example = with_training_fields(fields) if supervised else fields
        example.update({name: col[i] for name, col in provenance.items()})
        examples.append(example)
    counts_col = batch.column("doc_counts")
    read = counts_col.field("read").to_numpy().tolist()
    emitted = counts_col.field("emitted").to_numpy().tolist()
    skipped = counts_col.field("skipped").to_pylist()
    truncated = counts_col.field("truncated_tokens").to_numpy().tolist()
    dropped = counts_col.field("dropped_tokens").to_numpy().tolist()
    truncated_docs = counts_col.field("truncated_docs").to_numpy().tolist()
    counts = [
        DocCounts(read[i], emitted[i], Counter(json.loads(skipped[i])) if skipped[i] else Counter(), truncated[i], dropped[i], truncated_docs[i])
        for i in range(n)
    ]
    return examples, counts

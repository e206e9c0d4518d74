"""The Parquet schema of a cache shard, and conversion between examples and Arrow.

An example carries four token fields (``input_ids`` int32, ``segment_ids`` int32,
``position_ids`` int32, ``loss_mask`` int8). A shard file of layout 2 (manifest format 2)
stores only what cannot be derived, as lists whose elements are never null (no definition
levels to decode per token):

- ``input_ids`` (plain, zstd: within 8% of byte-stream-split's size on the benchmark corpora,
  and read by every Parquet reader; see ``PARQUET_OPTIONS``);
- ``segment_ids`` (dictionary/RLE: long runs);
- ``loss_mask``: null for a row whose mask is 1 exactly on its real tokens (``segment_ids > 0``),
  the mask itself otherwise (SFT rows);
- ``position_ids`` are not stored: every packer restarts them at 0 for each piece and puts 0
  on padding, so they follow from ``segment_ids`` (the writer checks this for every row).

Layout 1 files (every field stored, nullable lists) are still read. Then come the example's
provenance (``shard``, ``index``, ``doc``, ``token``) and ``doc_counts``: the documents the
stream finished with this example (what ``stats()`` adds up). Conversions go column-wise
through numpy: no per-token Python work.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from beamtok._src.base.errors import CacheError
from beamtok._src.shards.items import NO_COUNTS, DocCounts
from beamtok._src.shards.rows import RowBlock, TokenColumn, columns_of, row_offsets

__all__ = [
    "COMPAT_PARQUET_OPTIONS",
    "PARQUET_OPTIONS",
    "TOKEN_FIELDS",
    "batch_to_block",
    "cache_schema",
    "derive_positions",
    "examples_to_table",
    "parquet_options",
    "token_columns_to_table",
]

TOKEN_FIELDS: dict[str, pa.DataType] = {
    "input_ids": pa.int32(),
    "segment_ids": pa.int32(),
    "position_ids": pa.int32(),
    "loss_mask": pa.int8(),
}
# the numpy dtype of each token field (pyarrow's to_pandas_dtype() would import pandas)
TOKEN_DTYPES: dict[str, np.dtype[Any]] = {name: np.dtype(str(t)) for name, t in TOKEN_FIELDS.items()}
PROVENANCE_FIELDS: dict[str, pa.DataType] = {
    "shard": pa.int32(),
    "index": pa.int64(),
    "doc": pa.int64(),
    "token": pa.int64(),
}
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
# ParquetWriter options of a layout-2 shard file. Token ids are PLAIN-encoded: BYTE_STREAM_SPLIT,
# the earlier default, saved little space and read time that no training step notices
# (docs/performance.md, benchmarks/results/parquet_encoding.json), while pyarrow < 16 and
# fastparquet cannot read it. Files written with it are still read.
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "use_dictionary": ["segment_ids.list.element", "loss_mask.list.element", "doc_counts.skipped"],
    "write_statistics": ["doc", "index"],
    "write_page_checksum": True,
}
# --parquet-compat: snappy, the one codec every Parquet reader has (older Spark, Hive and
# Presto builds lack zstd); the encodings (PLAIN, RLE, RLE_DICTIONARY) are Parquet 1.0's
COMPAT_PARQUET_OPTIONS: dict[str, Any] = {**PARQUET_OPTIONS, "compression": "snappy"}


def parquet_options(compat: bool = False) -> dict[str, Any]:
    """ParquetWriter options of a shard file: the default, or those of ``--parquet-compat``."""
    return COMPAT_PARQUET_OPTIONS if compat else PARQUET_OPTIONS


def _tokens_type(dtype: pa.DataType) -> pa.DataType:
    return pa.list_(pa.field("element", dtype, nullable=False))


def cache_schema() -> pa.Schema:
    """The schema of a layout-2 shard file."""
    fields = [
        pa.field("input_ids", _tokens_type(pa.int32()), nullable=False),
        pa.field("segment_ids", _tokens_type(pa.int32()), nullable=False),
        pa.field("loss_mask", _tokens_type(pa.int8())),
    ]
    fields += [pa.field(k, t, nullable=False) for k, t in PROVENANCE_FIELDS.items()]
    fields.append(pa.field("doc_counts", COUNTS_TYPE, nullable=False))
    return pa.schema(fields)


def derive_positions(segments: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Position ids of rows given flat: 0 where a row or a run of equal segment ids starts,
    counting up within the run, 0 on padding (segment 0). ``offsets`` are the row starts
    (and the end)."""
    rows = len(offsets) - 1
    width = int(offsets[1] - offsets[0]) if rows > 0 else 0
    if width > 1 and offsets[0] == 0 and len(segments) == rows * width and bool((np.diff(offsets) == width).all()):
        return _grid_positions(segments.reshape(rows, width)).reshape(-1)
    return _run_positions(segments, offsets)


def _grid_positions(grid: np.ndarray) -> np.ndarray:
    """Positions of rows of one width: ``0..width-1`` in every row of one run (most packed
    rows), worked out run by run only in the rows holding several runs or padding."""
    rows, width = grid.shape
    positions = np.empty((rows, width), dtype=np.int32)
    positions[:] = np.arange(width, dtype=np.int32)
    mixed = np.flatnonzero((grid[:, 1:] != grid[:, :-1]).any(axis=1) | (grid[:, 0] == 0))
    if len(mixed):
        sub = grid[mixed].reshape(-1)
        positions[mixed] = _run_positions(sub, np.arange(0, len(sub) + 1, width)).reshape(-1, width)
    return positions


def _run_positions(segments: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    n = len(segments)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    change = np.empty(n, dtype=bool)
    change[0] = True
    np.not_equal(segments[1:], segments[:-1], out=change[1:])
    starts_of_rows = offsets[:-1]
    change[starts_of_rows[starts_of_rows < n]] = True
    starts = np.flatnonzero(change)
    index_type = np.int32 if n < 2**31 else np.int64
    positions = np.arange(n, dtype=index_type)
    positions -= np.repeat(starts.astype(index_type), np.diff(starts, append=n))
    if not segments.all():
        positions[segments == 0] = 0
    return positions.astype(np.int32, copy=False)


def _list_array(
    values: np.ndarray, offsets: np.ndarray, dtype: pa.DataType, mask: np.ndarray | None = None
) -> pa.Array:
    if offsets[-1] >= 2**31:
        raise CacheError(f"a row group of {offsets[-1]} tokens is too large; use a smaller row_group_rows")
    list_type = _tokens_type(dtype)
    offsets_array = pa.array(offsets.astype(np.int32))
    values_array = pa.array(values.astype(np.dtype(str(dtype)), copy=False))
    if mask is None:
        return pa.ListArray.from_arrays(offsets_array, values_array, type=list_type)
    return pa.ListArray.from_arrays(offsets_array, values_array, type=list_type, mask=pa.array(mask))


def examples_to_table(examples: list[dict[str, Any]], counts: list[DocCounts]) -> pa.Table:
    """Build a layout-2 cache table from examples and the document counts each one carries.
    Raises CacheError if an example's ``position_ids`` do not follow from its segments (a
    packer bug: reading would return other positions)."""
    offsets = row_offsets([ex["input_ids"] for ex in examples])
    flat = {
        name: np.concatenate([ex[name] for ex in examples]) if examples else np.zeros(0, dtype=TOKEN_DTYPES[name])
        for name in TOKEN_FIELDS
    }
    provenance = {
        name: np.fromiter((ex[name] for ex in examples), dtype=np.int64, count=len(examples))
        for name in PROVENANCE_FIELDS
    }
    return token_columns_to_table(flat, offsets, provenance, counts, lambda row: examples[row].get("index", row))


def token_columns_to_table(
    flat: Mapping[str, np.ndarray | None],
    offsets: np.ndarray,
    provenance: dict[str, np.ndarray],
    counts: list[DocCounts],
    name_row: Any = None,
) -> pa.Table:
    """A layout-2 cache table from rows given column-wise: each token field's values end to end
    (``TOKEN_FIELDS``), the rows' ``offsets`` into them, each provenance field and each row's
    document counts. Raises CacheError if ``position_ids`` do not follow from the segments
    (``name_row(row)`` names the row in the message). A maker whose positions follow from the
    segments by construction (a packed block's layout) leaves ``position_ids`` out, and a
    ``loss_mask`` of None says the mask is each row's real tokens."""
    segments = _present(flat, "segment_ids").astype(np.int32, copy=False)
    for name in ("segment_ids", "position_ids", "loss_mask"):
        values = flat.get(name)
        if values is not None and len(values) != offsets[-1]:
            raise CacheError(f"an example's {name} is not as long as its input_ids")
    positions = flat.get("position_ids")
    wrong = (
        np.flatnonzero(derive_positions(segments, offsets) != positions)
        if positions is not None
        else np.zeros(0, dtype=np.int64)
    )
    if len(wrong):
        row = int(np.searchsorted(offsets, wrong[0], side="right")) - 1
        named = name_row(row) if name_row is not None else row
        raise CacheError(f"example {named}: position_ids do not restart at each segment as the cache layout requires")
    mask = flat.get("loss_mask")
    columns: dict[str, pa.Array] = {
        "input_ids": _list_array(_present(flat, "input_ids"), offsets, pa.int32()),
        "segment_ids": _list_array(segments, offsets, pa.int32()),
        "loss_mask": _null_mask_column(offsets) if mask is None else _mask_column(mask, segments, offsets),
    }
    for name, dtype in PROVENANCE_FIELDS.items():
        columns[name] = pa.array(provenance[name], type=dtype)
    columns["doc_counts"] = _counts_array(counts)
    return pa.table(columns, schema=cache_schema())


def _present(flat: Mapping[str, np.ndarray | None], name: str) -> np.ndarray:
    values = flat.get(name)
    if values is None:
        raise CacheError(f"rows without {name} cannot be written to a cache")
    return values


def _null_mask_column(offsets: np.ndarray) -> pa.Array:
    """The loss mask column of rows whose mask is their real tokens: a null row each."""
    rows = len(offsets) - 1
    return _list_array(
        np.zeros(0, dtype=np.int8), np.zeros(rows + 1, dtype=np.int64), pa.int8(), mask=np.ones(rows, dtype=bool)
    )


def _mask_column(mask: np.ndarray, segments: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Null rows where the mask is exactly ``segments > 0``; the mask itself elsewhere."""
    wrong = mask != (segments > 0)
    if not wrong.any():  # pretraining rows: every mask is its row's real tokens, nothing is stored
        return _null_mask_column(offsets)
    differs = np.concatenate([[0], np.cumsum(wrong)])
    stored = differs[offsets[1:]] != differs[offsets[:-1]]
    lengths = np.where(stored, np.diff(offsets), 0)
    kept_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=kept_offsets[1:])
    keep = np.repeat(stored, np.diff(offsets))
    return _list_array(mask[keep], kept_offsets, pa.int8(), mask=~stored)


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


# ------------------------------------------------------------------ reading


def _numpy(array: pa.Array) -> np.ndarray:
    """An integer array without nulls as a zero-copy numpy view (pyarrow's ``to_numpy`` would
    import pandas, a fifth of a second at a reader's first row)."""
    if array.null_count or not pa.types.is_integer(array.type):
        return array.to_numpy(zero_copy_only=False)
    dtype = np.dtype(str(array.type))
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def _list_parts(column: pa.Array, dtype: np.dtype[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Flat values and row offsets (from 0) of a list column without null rows."""
    offsets = _numpy(column.offsets).astype(np.int64)
    values = _numpy(column.values).astype(dtype, copy=False)
    if offsets[0] != 0 or offsets[-1] != len(values):
        values = values[offsets[0] : offsets[-1]]
        offsets = offsets - offsets[0]
    return values, offsets


def _mask_values(column: pa.Array, segments: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A layout-2 ``loss_mask`` column: null rows take ``segments > 0``."""
    if column.null_count == len(column):
        return (segments > 0).view(np.int8)
    if column.null_count == 0:
        return _list_parts(column, TOKEN_DTYPES["loss_mask"])[0]
    mask = (segments > 0).astype(np.int8)
    stored_offsets = _numpy(column.offsets).tolist()
    values = _numpy(column.values)
    for row in np.flatnonzero(_valid(column)).tolist():
        a, b = stored_offsets[row], stored_offsets[row + 1]
        mask[offsets[row] : offsets[row + 1]] = values[a:b]
    return mask


def _valid(column: pa.Array) -> np.ndarray:
    """Which rows of an array are not null, from its validity bitmap."""
    bitmap = column.buffers()[0]
    if bitmap is None:
        return np.ones(len(column), dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[column.offset : column.offset + len(column)].astype(bool)


def _token_columns(batch: pa.RecordBatch) -> dict[str, TokenColumn]:
    names = batch.schema.names
    if "position_ids" in names:  # layout 1: every field stored
        parts = {name: _list_parts(batch.column(name), TOKEN_DTYPES[name]) for name in TOKEN_FIELDS}
        return {name: TokenColumn.of(values, offsets) for name, (values, offsets) in parts.items()}
    ids, offsets = _list_parts(batch.column("input_ids"), TOKEN_DTYPES["input_ids"])
    segments, segment_offsets = _list_parts(batch.column("segment_ids"), TOKEN_DTYPES["segment_ids"])
    if not np.array_equal(offsets, segment_offsets):
        raise CacheError("segment_ids and input_ids rows differ in length")
    fields = [
        ("input_ids", ids),
        ("segment_ids", segments),
        ("position_ids", derive_positions(segments, offsets)),
        ("loss_mask", _mask_values(batch.column("loss_mask"), segments, offsets)),
    ]
    return columns_of(fields, offsets)


def _counts_of(column: pa.StructArray) -> tuple[list[DocCounts], list[int]]:
    """One DocCounts a row (rows that finished no document share the empty NO_COUNTS), and
    the rows whose counts are not empty."""
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
    return counts, busy


def batch_to_block(batch: pa.RecordBatch, supervised: bool = False) -> RowBlock:
    """Cache rows (of either layout) decoded into a :class:`RowBlock`; ``supervised`` makes
    its examples carry ``labels`` and ``attention_mask`` as the shard processing does."""
    shard, index, doc, token = (_numpy(batch.column(name)) for name in PROVENANCE_FIELDS)
    counts, busy = _counts_of(batch.column("doc_counts"))
    block = RowBlock(_token_columns(batch), counts, (shard, index, doc, token), supervised, busy=busy)
    if block.columns:
        block.count_tokens()  # here, on the decoding thread, not per batch on the stream's
    return block

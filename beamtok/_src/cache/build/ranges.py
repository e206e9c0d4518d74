"""Split large input files into ranges tokenized in parallel, packed in order afterwards.

A build tokenizes each range of a file on its own worker and writes the range's tokenized
documents to a temporary file; one worker then reads those files in range order and packs them,
exactly as the unsplit shard processing packs the file's documents. Tokenizing is per document,
so the documents, and the packed rows, cursors and counts, are those of the unsplit build.

The bounds are those ``beamtok._src.sources.byte_ranges`` computes (byte offsets at line starts in
uncompressed JSONL, runs of row groups in Parquet, one range for anything else): the ranges a
stream cuts a file into for its readers are these ranges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from beamtok._src.base.errors import ConfigError
from beamtok._src.cache.format.manifest import SHARDS_DIR
from beamtok._src.cache.format.storage import Storage
from beamtok._src.core.cache_options import BUILD_DEFAULTS
from beamtok._src.core.spec import SourceSpec
from beamtok._src.shards.document_lengths import DocumentLengths
from beamtok._src.shards.items import DocCounts, DocItem
from beamtok._src.sources.byte_ranges import file_bounds, split_range
from beamtok._src.sources.readers import source_format
from beamtok._src.sources.urls import Shard
from beamtok._src.transforms.sft import TokenDoc

__all__ = [
    "DEFAULT_SPLIT_BYTES",
    "LEGACY_RANGES_DIR",
    "RANGES_DIR",
    "InputRange",
    "RangeWritten",
    "parse_size",
    "plan_ranges",
    "range_document_lengths",
    "range_file",
    "read_range_file",
    "split_bytes_option",
    "write_range_file",
]

RANGES_DIR = "ranges"  # tokenized documents of ranges, removed once packed
LEGACY_RANGES_DIR = f"{SHARDS_DIR}/ranges"  # where builds before records/ put them

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6, "mib": 2**20,
          "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}  # fmt: skip


def parse_size(text: str | int, name: str = "--split-bytes") -> int:
    """Bytes from ``1048576``, ``64MB``, ``1GiB``, ``512k``... (decimal units, or binary with i)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _SIZE.match(str(text))
        unit = (match.group(2) or "").lower() if match else ""
        if match is None or unit not in _UNITS:
            raise ConfigError(f"{name}: {text!r} is not a size (write e.g. 268435456, 256MB, 64MiB or 1GB)")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value < 1:
        raise ConfigError(f"{name} must be at least 1 byte, got {text!r}")
    return value


def split_bytes_option(value: str | int | None, name: str = "--split-bytes") -> int | None:
    """The split size an option asks for: None for ``None``, ``"none"``, ``"off"`` or ``0``
    (never split), else a size as :func:`parse_size` reads it."""
    if value is None or str(value).strip().lower() in ("none", "off", "0"):
        return None
    return parse_size(value, name)


# ranges of a few seconds of tokenizing: enough of them to share out evenly (the option table's default)
DEFAULT_SPLIT_BYTES = parse_size(BUILD_DEFAULTS["split_bytes"])


@dataclass(frozen=True)
class InputRange:
    """Range ``number`` of ``count`` of shard ``shard``: the documents whose doc cursors lie in
    ``[start, stop)`` (``stop`` None: to the end); ``total`` is what fractions are taken of
    (the file's bytes or rows)."""

    shard: int
    number: int
    count: int
    start: int
    stop: int | None
    total: int


def plan_ranges(shard: Shard, source: SourceSpec, split_bytes: int) -> list[InputRange]:
    """The ranges ``shard`` is tokenized in: one, unless it is a large splittable file."""
    whole = [InputRange(shard.index, 0, 1, 0, None, 0)]
    if shard.data is not None or split_range(shard.url)[1:] != (0, None):
        return whole  # in memory, or already a range of a file the dataset cut
    found = file_bounds(shard.location(), source_format(shard.url, source), split_bytes)
    if found is None:
        return whole
    bounds, total = found
    count = len(bounds) - 1
    return [
        InputRange(shard.index, i, count, bounds[i], bounds[i + 1] if i + 1 < count else None, total)
        for i in range(count)
    ]


def range_file(part: InputRange) -> str:
    return f"{RANGES_DIR}/shard-{part.shard:05d}-range-{part.number:05d}-of-{part.count:05d}.arrow"


RANGE_SCHEMA = pa.schema(
    [
        ("cursor", pa.int64()),
        ("skip", pa.string()),  # the skip reason; null for an emitted document
        ("truncated", pa.bool_()),
        ("input_ids", pa.list_(pa.int32())),
        ("loss_mask", pa.list_(pa.int8())),  # null: every token is trained
    ]
)
BATCH_DOCS = 512


def _batch(items: list[DocItem]) -> pa.RecordBatch:
    skips = [None if item.value is not None else next(iter(item.counts.skipped)) for item in items]
    ids = [item.value.ids if item.value is not None else None for item in items]
    masks = [item.value.mask if item.value is not None else None for item in items]
    return pa.record_batch(
        [
            pa.array([item.cursor for item in items], pa.int64()),
            pa.array(skips, pa.string()),
            pa.array([bool(item.counts.truncated_docs) for item in items], pa.bool_()),
            pa.array(ids, pa.list_(pa.int32())),
            pa.array(masks, pa.list_(pa.int8())),
        ],
        schema=RANGE_SCHEMA,
    )


@dataclass(frozen=True)
class RangeWritten:
    """What one range's tokenized file holds: documents (emitted or skipped) and tokens."""

    documents: int
    tokens: int


def write_range_file(storage: Storage, rel: str, documents: Iterable[DocItem]) -> RangeWritten:
    """Write a range's tokenized documents (as the shard processing reads them) to ``rel``;
    return how many documents and tokens."""
    count = tokens = 0
    with storage.writing(rel) as sink, pa.ipc.new_stream(sink, RANGE_SCHEMA) as writer:
        pending: list[DocItem] = []
        for item in documents:
            if item.through != item.cursor or (item.value is None) != bool(item.counts.skipped):
                raise AssertionError(f"document {item.cursor}: not a single document's item")
            pending.append(item)
            if item.value is not None:
                tokens += len(item.value.ids)
            if len(pending) >= BATCH_DOCS:
                writer.write_batch(_batch(pending))
                count += len(pending)
                pending = []
        if pending:
            writer.write_batch(_batch(pending))
            count += len(pending)
    return RangeWritten(count, tokens)


def read_range_file(storage: Storage, rel: str) -> Iterator[DocItem]:
    """The documents :func:`write_range_file` wrote, as equal DocItems."""
    with storage.open_input(rel) as f:
        for batch in pa.ipc.open_stream(f):
            cursors = batch.column(0).to_pylist()
            skips = batch.column(1).to_pylist()
            truncated = batch.column(2).to_pylist()
            ids, id_offsets = _flat(batch.column(3), np.int32)
            masks, mask_offsets = _flat(batch.column(4), np.int8)
            has_mask = batch.column(4).is_valid().to_pylist()
            for i, cursor in enumerate(cursors):
                if skips[i] is not None:
                    yield DocItem(cursor, None, DocCounts(read=1, skipped={skips[i]: 1}), cursor)
                    continue
                mask = masks[mask_offsets[i] : mask_offsets[i + 1]].copy() if has_mask[i] else None
                value = TokenDoc(ids[id_offsets[i] : id_offsets[i + 1]].copy(), mask)
                yield DocItem(cursor, value, DocCounts(read=1, emitted=1, truncated_docs=int(truncated[i])), cursor)


def range_document_lengths(storage: Storage, rel: str) -> DocumentLengths:
    """The token lengths of the tokenized documents :func:`write_range_file` wrote to ``rel``
    (the list lengths alone: no token is decoded)."""
    lengths = DocumentLengths()
    with storage.open_input(rel) as f:
        for batch in pa.ipc.open_stream(f):
            skipped = batch.column(1).is_valid().to_numpy(zero_copy_only=False)
            for n in batch.column(3).value_lengths().to_numpy(zero_copy_only=False)[~skipped].tolist():
                lengths.add(int(n))
    return lengths


def _flat(column: pa.ListArray, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """A list column's values and offsets (absolute into those values)."""
    offsets = column.offsets.to_numpy()
    values = column.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    return values, offsets - offsets[0]

"""Write one shard of a cache: run the shard processing and stream its rows into Parquet.

Used by the Beam DoFn (and nothing else), but kept free of Beam so it can be tested alone.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.sizes import (
    ROW_BYTES_PER_TOKEN,
    ROW_GROUP_BYTES,
    check_ceiling,
    check_memory,
    default_group_rows,
)
from beamtok._src.base.validate import check_optional_int
from beamtok._src.cache.format.manifest import ShardEntry, legacy_sidecar_file, shard_file, sidecar_file
from beamtok._src.cache.format.schema import (
    PROVENANCE_FIELDS,
    cache_schema,
    examples_to_table,
    parquet_options,
    token_columns_to_table,
)
from beamtok._src.cache.format.storage import HashingWriter, Storage
from beamtok._src.shards.document_lengths import DocumentLengths
from beamtok._src.shards.items import NO_COUNTS, DocCounts, Produced, ShardCursor
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.shards.rows import PROVENANCE
from beamtok._src.shards.spans import SpanReader, Taken
from beamtok._src.sources.urls import Shard, is_remote, split_range

log = logging.getLogger(__name__)

__all__ = [
    "ROW_GROUP_BYTES",
    "WrittenRows",
    "check_layout",
    "completed_entry",
    "record_shard",
    "recorded_document_lengths",
    "rows_per_group",
    "write_row_groups",
    "write_rows",
    "write_shard",
]

MAX_ROW_GROUP_BYTES = 1 << 31  # Parquet readers decode a row group at once
DOCUMENT_TOKENS = "document_tokens"  # the key of a shard record's document lengths


def rows_per_group(seq_len: int | None, rows: int | None = None, nbytes: int | None = None) -> int:
    """Rows per Parquet row group: ``rows`` if given, else as many rows as fit ``nbytes`` of
    int32 tokens (default ROW_GROUP_BYTES), at least 64 in that case."""
    if rows is not None:
        return rows
    return default_group_rows(seq_len, nbytes)


def check_layout(
    row_group_rows: int | None, row_group_bytes: int | None, seq_len: int | None, parquet_compat: bool = False
) -> dict[str, Any]:
    """The file layout options, checked: the row-group options (whole numbers, one of them at
    most, and a row group a writer can hold in memory: it is built whole before it is written)
    and whether files are written for every Parquet reader (``parquet_compat``)."""
    if not isinstance(parquet_compat, bool):
        raise ConfigError(f"parquet_compat must be true or false, not {parquet_compat!r}")
    check_optional_int(row_group_rows, "row_group_rows", minimum=1)
    check_optional_int(row_group_bytes, "row_group_bytes", minimum=1)
    if row_group_rows is not None and row_group_bytes is not None:
        raise ConfigError("give row_group_rows or row_group_bytes, not both")
    if row_group_bytes is not None:
        check_ceiling(row_group_bytes, "row_group_bytes", MAX_ROW_GROUP_BYTES, "bytes")
    rows = rows_per_group(seq_len, row_group_rows, row_group_bytes)
    check_memory(
        f"a row group of {rows:,} rows of {seq_len or 2048:,} tokens",
        rows * (seq_len or 2048) * ROW_BYTES_PER_TOKEN * 2,
    )
    return {"row_group_rows": row_group_rows, "row_group_bytes": row_group_bytes, "parquet_compat": parquet_compat}


def completed_entry(storage: Storage, shard: Shard, fingerprint: str, *, check_file: bool = True) -> ShardEntry | None:
    """The entry of ``shard`` if an earlier run completed it for this fingerprint from the same
    input (same URL, and for a local file the same size) and its file is still the one written
    (its SHA-256: one read of the file, far cheaper than rebuilding it; ``check_file=False``
    where a reader checks it anyway), else None; an altered file is removed, so the shard is
    rebuilt."""
    rel = sidecar_file(shard.index)
    if not storage.exists(rel):
        rel = legacy_sidecar_file(shard.index)  # a cache written before records/
        if not storage.exists(rel):
            return None
    record = json.loads(storage.read_bytes(rel))
    record.pop(DOCUMENT_TOKENS, None)
    entry = ShardEntry.from_json(record, storage.display(rel))
    if entry.fingerprint != fingerprint or entry.url != shard.url or storage.size(entry.file) != entry.bytes:
        return None
    if entry.source_size is not None and source_size(shard) != entry.source_size:
        return None  # the input file changed since the shard was written
    if check_file and storage.sha256(entry.file) != entry.sha256:
        log.warning(
            "%s: shard %d's file was altered after it was written (checksum mismatch): rebuilding it",
            storage.url,
            shard.index,
        )
        storage.delete(rel)
        storage.delete(entry.file)
        return None
    return entry


def source_size(shard: Shard) -> int | None:
    """The size of a local input file (None for remote and in-memory shards)."""
    if is_remote(shard.url) or shard.data is not None:
        return None
    try:
        return os.path.getsize(split_range(shard.location())[0])
    except OSError:
        return None


def write_shard(
    storage: Storage,
    processor: ShardProcessor,
    shard: Shard,
    seq_len: int | None,
    *,
    row_group_rows: int | None = None,
    row_group_bytes: int | None = None,
    parquet_compat: bool = False,
    report: Callable[[ShardCursor, int, int, int], None] | None = None,
) -> ShardEntry:
    """Run the shard processing over ``shard`` and write its rows (see :func:`write_rows`),
    recording its documents' lengths."""
    lengths = DocumentLengths()
    return write_rows(
        storage,
        shard,
        processor.pack(shard.index, lengths.tally(processor.documents(shard))),
        processor.spec.fingerprint,
        seq_len,
        row_group_rows=row_group_rows,
        row_group_bytes=row_group_bytes,
        parquet_compat=parquet_compat,
        report=report,
        document_lengths=lengths,
    )


def write_rows(
    storage: Storage,
    shard: Shard,
    produced_rows: Iterable[Produced],
    fingerprint: str,
    seq_len: int | None,
    *,
    row_group_rows: int | None = None,
    row_group_bytes: int | None = None,
    parquet_compat: bool = False,
    report: Callable[[ShardCursor, int, int, int], None] | None = None,
    document_lengths: DocumentLengths | None = None,
) -> ShardEntry:
    """Write a whole shard's examples (what the shard processing yields for it, from its start)
    to its Parquet file, then its sidecar; return the entry. The file appears complete or not
    at all: an exception from ``produced_rows`` discards it.

    Row groups hold ``row_group_rows`` rows, or about ``row_group_bytes`` of tokens; the
    layout (and ``parquet_compat``: see ``parquet_options``) never changes the rows, so it is
    not part of the spec. ``report(cursor after,
    tokens, rows, documents read)`` is called after every example (see ``cache.progress``).
    ``document_lengths``, filled while ``produced_rows`` is read, goes into the shard's record."""
    group = rows_per_group(seq_len, row_group_rows, row_group_bytes)
    rel = shard_file(shard.index)
    with storage.writing(rel) as sink:
        hashing = HashingWriter(sink)
        written = write_row_groups(hashing, produced_rows, group, report=report, parquet_compat=parquet_compat)
    return record_shard(storage, shard, hashing, written, fingerprint, document_lengths)


def record_shard(
    storage: Storage,
    shard: Shard,
    hashing: HashingWriter,
    written: WrittenRows,
    fingerprint: str,
    document_lengths: DocumentLengths | None = None,
) -> ShardEntry:
    """The entry of ``shard``'s file, just written through ``hashing``; its sidecar is written
    (what marks the shard complete), with its documents' lengths where the build knows them
    (see :mod:`beamtok._src.shards.document_lengths`)."""
    rel = shard_file(shard.index)
    entry = ShardEntry(
        index=shard.index,
        url=shard.url,
        source_size=source_size(shard),
        file=rel,
        bytes=hashing.bytes,
        sha256=hashing.sha256.hexdigest(),
        rows=written.rows,
        tokens=written.tokens,
        pad_tokens=written.pad_tokens,
        documents=written.documents.to_json(),
        fingerprint=fingerprint,
        footer_sha256=storage.parquet_footer_sha256(rel),
    )
    record = entry.to_json()
    if document_lengths is not None:
        record[DOCUMENT_TOKENS] = document_lengths.to_json()
    storage.write_bytes(sidecar_file(shard.index), json.dumps(record).encode())
    return entry


def recorded_document_lengths(storage: Storage, index: int) -> DocumentLengths | None:
    """The document lengths shard ``index``'s record holds, or None (a build that could not
    know them, or one of before they were recorded)."""
    rel = sidecar_file(index)
    if not storage.exists(rel):
        return None
    record = json.loads(storage.read_bytes(rel))
    if DOCUMENT_TOKENS not in record:
        return None
    return DocumentLengths.from_json(record[DOCUMENT_TOKENS], storage.display(rel))


@dataclass(frozen=True)
class WrittenRows:
    """What :func:`write_row_groups` wrote: rows, real and pad tokens, and the counts of the
    documents those rows carry."""

    rows: int = 0
    tokens: int = 0
    pad_tokens: int = 0
    documents: DocCounts = NO_COUNTS

    def __add__(self, other: WrittenRows) -> WrittenRows:
        return WrittenRows(
            self.rows + other.rows,
            self.tokens + other.tokens,
            self.pad_tokens + other.pad_tokens,
            self.documents + other.documents,
        )


def write_row_groups(
    sink: Any,
    produced_rows: Iterable[Produced],
    group: int,
    *,
    report: Callable[[ShardCursor, int, int, int], None] | None = None,
    empty_group: bool = True,
    parquet_compat: bool = False,
) -> WrittenRows:
    """Write examples to ``sink`` as one Parquet file of row groups of ``group`` rows (the
    last may be shorter). With no example at all, one empty row group is written unless
    ``empty_group`` is False (then nothing is written to ``sink``). ``parquet_compat``: the
    options of :func:`~beamtok._src.cache.format.schema.parquet_options`. Rows that come as row
    blocks (a :class:`~beamtok._src.shards.spans.SpanReader`: ``concat_chunk``'s) are written a
    block at a time, with no dict per row; the file is the same."""
    options = parquet_options(parquet_compat)
    writer: pq.ParquetWriter | None = None
    tables = (
        _block_tables(produced_rows, group, report)
        if isinstance(produced_rows, SpanReader)
        else _example_tables(produced_rows, group, report)
    )
    written = WrittenRows()
    try:
        for table, part in tables:
            written = written + part
            if table is None:
                continue
            if table.num_rows or (written.rows == 0 and empty_group):
                writer = writer or pq.ParquetWriter(sink, cache_schema(), **options)
                writer.write_table(table, row_group_size=group)
    finally:
        if writer is not None:
            writer.close()  # also on failure: an unclosed writer would flush into the discarded file later
    return written


Tables = Iterator[tuple[pa.Table | None, WrittenRows]]


def _example_tables(
    produced_rows: Iterable[Produced], group: int, report: Callable[[ShardCursor, int, int, int], None] | None
) -> Tables:
    """Row groups of ``group`` examples, one dict each, and what each holds (the last one
    holds the rest, and is written empty when there is no row at all)."""
    documents = NO_COUNTS
    rows = tokens = 0
    examples: list[dict[str, Any]] = []
    counts: list[DocCounts] = []
    part = WrittenRows()
    for produced in produced_rows:
        documents = documents + produced.counts
        part = part + WrittenRows(documents=produced.counts)
        if produced.example is None:
            continue
        examples.append(produced.example)
        counts.append(produced.counts)
        real = int((produced.example["segment_ids"] > 0).sum())
        tokens += real
        part = part + WrittenRows(1, real, len(produced.example["input_ids"]) - real)
        if len(examples) >= group:
            rows += len(examples)
            yield examples_to_table(examples, counts), part
            examples, counts, part = [], [], WrittenRows()
        if report is not None:
            report(produced.cursor, tokens, rows + len(examples), documents.read)
    yield examples_to_table(examples, counts), part


def _block_tables(
    reader: SpanReader, group: int, report: Callable[[ShardCursor, int, int, int], None] | None
) -> Tables:
    """Row groups of ``group`` rows taken from row blocks column-wise, and what each holds."""
    documents = NO_COUNTS
    rows = tokens = 0
    pieces: list[Taken] = []
    held = 0
    part = WrittenRows()
    while True:
        taken = reader.take(group - held)
        if taken is None:
            break
        documents = documents + taken.counts
        part = part + WrittenRows(documents=taken.counts)
        if taken.block is not None and taken.rows:
            real, pad = taken.block.real_tokens(taken.lo, taken.hi)
            tokens += real
            part = part + WrittenRows(taken.rows, real, pad)
            pieces.append(taken)
            held += taken.rows
        if held >= group:
            rows += held
            yield _pieces_table(pieces), part
            pieces, held, part = [], 0, WrittenRows()
        if report is not None:
            report(taken.cursor, tokens, rows + held, documents.read)
    yield _pieces_table(pieces), part


def _pieces_table(pieces: list[Taken]) -> pa.Table:
    """The cache table of these rows of row blocks: the columns a file stores (see
    :meth:`~beamtok._src.shards.rows.RowBlock.file_columns`), joined."""
    if not pieces:
        return examples_to_table([], [])
    ids: list[np.ndarray] = []
    segments: list[np.ndarray] = []
    masks: list[np.ndarray | None] = []
    positions: list[np.ndarray | None] = []
    lengths: list[np.ndarray] = []
    provenance: dict[str, list[np.ndarray]] = {name: [] for name in PROVENANCE_FIELDS}
    counts: list[DocCounts] = []
    for piece in pieces:
        block = piece.block
        assert block is not None
        id_column, segment_column, position_column, mask_column = block.file_columns()
        offsets = id_column.offsets
        lo, hi = int(offsets[piece.lo]), int(offsets[piece.hi])
        ids.append(id_column.values[lo:hi])
        segments.append(segment_column.values[lo:hi])
        masks.append(None if mask_column is None else mask_column.values[lo:hi])
        positions.append(None if position_column is None else position_column.values[lo:hi])
        lengths.append(np.diff(offsets[piece.lo : piece.hi + 1]))
        for name, values in zip(PROVENANCE, block.provenance):
            provenance[name].append(values[piece.lo : piece.hi])
        counts += block.counts[piece.lo : piece.hi]
    row_ends = np.concatenate(lengths)
    offsets_out = np.zeros(len(row_ends) + 1, dtype=np.int64)
    np.cumsum(row_ends, out=offsets_out[1:])
    flat: dict[str, np.ndarray | None] = {
        "input_ids": np.concatenate(ids),
        "segment_ids": np.concatenate(segments),
        "loss_mask": _joined_mask(masks, segments),
    }
    if all(p is not None for p in positions):  # rows not made from a layout: their positions are checked
        flat["position_ids"] = np.concatenate(positions)  # type: ignore[arg-type]
    return token_columns_to_table(
        flat, offsets_out, {name: np.concatenate(parts) for name, parts in provenance.items()}, counts
    )


def _joined_mask(masks: list[np.ndarray | None], segments: list[np.ndarray]) -> np.ndarray | None:
    """The pieces' loss masks end to end, or None when every piece's is its real tokens."""
    if all(mask is None for mask in masks):
        return None
    return np.concatenate([(seg > 0).astype(np.int8) if mask is None else mask for mask, seg in zip(masks, segments)])

"""Readers: open a shard at a doc cursor and yield its raw documents in order.

Doc cursors (docs/architecture.md, "Cursors and the state"): byte offset for uncompressed JSONL, line number for compressed JSONL,
row index for Parquet, sample index for MDS shards, item index for in-memory sources, 0 for a
plain text file. Reopening at a cursor seeks (or, for compressed JSONL, skips lines without parsing them).
"""

from __future__ import annotations

import itertools
import lzma
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any, Protocol

from beamtok._src.base.errors import ConfigError, InputError, StateError
from beamtok._src.sources.documents import ParseFailure, RawDocument, SkipReason, parse_json_line
from beamtok._src.sources.mds import is_mds_url, read_mds
from beamtok._src.sources.opening import COMPRESSED_SUFFIXES, is_compressed, open_url
from beamtok._src.sources.row_groups import seek_row
from beamtok._src.sources.urls import Shard, is_remote, split_range

__all__ = [
    "RecordFormat",
    "cursor_words",
    "detect_format",
    "is_compressed",
    "open_url",
    "read_documents",
    "source_format",
]


class RecordFormat(Protocol):
    """What a reader needs to know of how records are read: the file ``format`` (or
    ``"auto"``), the ``text_field`` of a record, and the Parquet ``columns`` to read (None: all).
    The spec's source part (``beamtok._src.core.spec.SourceSpec``) is one."""

    @property
    def format(self) -> str: ...

    @property
    def text_field(self) -> str: ...

    @property
    def columns(self) -> tuple[str, ...] | None: ...


JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text")
PARQUET_ROWS_PER_BATCH = 1024


def detect_format(url: str) -> str:
    """Guess a file's format from its name (compression suffixes are looked through)."""
    url = split_range(url)[0]
    if is_mds_url(url):
        return "mds"
    name = url.lower()
    for suffix in COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".arrow"):
        return "arrow"
    if name.endswith(TEXT_SUFFIXES):
        return "text"
    raise ConfigError(
        f"{url}: cannot tell the format from the file name; pass format='jsonl', 'parquet', 'arrow', 'text' or 'mds'"
    )


def source_format(url: str, source: RecordFormat) -> str:
    """The format a file is read in: the source's, or told from the name under ``auto``."""
    return detect_format(url) if source.format == "auto" else source.format


def cursor_words(url: str | None, doc: int) -> str:
    """What doc cursor ``doc`` counts in the file at ``url``: a byte of uncompressed JSONL, a
    line of compressed JSONL, a row of Parquet and Arrow."""
    if url is None:
        return f"doc cursor {doc}"
    try:
        fmt = detect_format(url)
    except ConfigError:
        return f"doc cursor {doc}"
    if fmt == "jsonl":
        return f"line {doc + 1}" if is_compressed(url) else f"byte {doc:,}"
    if fmt in ("parquet", "arrow"):
        return f"row {doc:,}"
    if fmt == "text":
        return "the file's one document"
    return f"doc cursor {doc}"


def read_documents(shard: Shard, source: RecordFormat, start: int, stop: int | None = None) -> Iterator[RawDocument]:
    """Yield the documents of ``shard`` with doc cursors from ``start`` up to ``stop`` (None:
    to the end; a shard that is a range of a file ends at the range's end too), decoded into
    records.

    A document that cannot be decoded is yielded with a :class:`ParseFailure` as its payload,
    so the caller applies the error policy and counts it.
    """
    if shard.data is not None:
        documents = _read_memory(shard, start, source.text_field)
    else:
        url, first, end = split_range(shard.location())
        documents = _read_file(url, source, max(start, first))
        stop = end if stop is None else stop if end is None else min(stop, end)
    if stop is None:
        yield from documents
        return
    for document in documents:
        if document.cursor >= stop:
            return
        yield document


def _read_file(url: str, source: RecordFormat, start: int) -> Iterator[RawDocument]:
    fmt = source_format(url, source)
    if fmt == "jsonl":
        reader = _read_compressed_jsonl if is_compressed(url) else _read_jsonl
        yield from reader(url, start)
    elif fmt == "parquet":
        yield from _read_parquet(url, start, source.columns)
    elif fmt == "arrow":
        yield from _read_arrow(url, start, source.columns)
    elif fmt == "text":
        yield from _read_text(url, start, source.text_field)
    elif fmt == "mds":
        yield from read_mds(url, start, source.columns)
    else:
        raise ConfigError(f"{url}: format {fmt!r} needs an in-memory source")


def _read_jsonl(url: str, start: int) -> Iterator[RawDocument]:
    """Uncompressed JSONL: the cursor is the byte offset of a line's first byte."""
    with open_url(url, decompress=False) as f:
        if start:
            _seek_line_start(url, f, start)
        offset = start
        line_no = 1 if start == 0 else None
        for line in f:
            if not line.isspace():  # strip() would copy the whole line
                where = f"line {line_no}" if line_no is not None else f"byte {offset}"
                yield RawDocument(offset, where, parse_json_line(line))
            offset += len(line)
            if line_no is not None:
                line_no += 1


def _seek_line_start(url: str, f: IO[bytes], start: int) -> None:
    """Seek to byte ``start``, refusing a cursor that is not where a line begins."""
    f.seek(start - 1)
    before = f.read(1)
    if before != b"\n":
        where = "past the end of" if not before else "not at the start of a line in"
        raise StateError(
            f"{url}: doc cursor (byte offset {start}) is {where} the file; the state does not belong to this file"
        )


def _read_compressed_jsonl(url: str, start: int) -> Iterator[RawDocument]:
    """Compressed JSONL: the cursor is a 0-based line number; reopening skips lines unparsed.

    A file cut short keeps the documents before the break; the break itself is a document
    that failed (``truncated_file``), so the error policy reports or counts it.
    """
    with open_url(url, decompress=True) as f:
        line_no = 0
        for line in _lines_until_break(f):
            if isinstance(line, ParseFailure):
                if line_no < start:
                    raise StateError(
                        f"{url}: doc cursor (line {start + 1}) is past the break of this truncated file (line {line_no + 1})"
                    )
                yield RawDocument(line_no, f"line {line_no + 1}", line)
                return
            if line_no >= start and line and not line.isspace():
                yield RawDocument(line_no, f"line {line_no + 1}", parse_json_line(line))
            line_no += 1
        if start > line_no:
            raise StateError(f"{url}: doc cursor (line {start + 1}) is past the end of the file ({line_no} lines)")


def _lines_until_break(f: Iterable[bytes]) -> Iterator[bytes | ParseFailure]:
    """Lines of a decompressing reader; a truncated or corrupt stream ends with a ParseFailure."""
    it = iter(f)
    while True:
        try:
            line = next(it)
        except StopIteration:
            return
        except Exception as e:
            failure = _break_of(e)
            if failure is None:
                raise
            yield failure
            return
        yield line


# What decompressors raise at a truncated or corrupt stream (gzip's BadGzipFile and bz2's
# errors are OSErrors; zstandard's ZstdError is matched by name, the module loads lazily).
DECOMPRESSION_ERRORS = (EOFError, zlib.error, lzma.LZMAError, OSError)


def _break_of(e: Exception) -> ParseFailure | None:
    """The failure a decompressor's error stands for, or None for any other error."""
    if isinstance(e, DECOMPRESSION_ERRORS) or type(e).__name__ == "ZstdError":
        return ParseFailure(SkipReason.TRUNCATED, f"compressed file is truncated or corrupt here: {e}")
    return None


def _read_parquet(url: str, start: int, columns: Sequence[str] | None) -> Iterator[RawDocument]:
    """Parquet: the cursor is a row index; reopening starts at the row group holding it."""
    import pyarrow.parquet as pq

    source: Any = url if not is_remote(url) else open_url(url, decompress=False)
    try:
        pf = pq.ParquetFile(source)
    except FileNotFoundError as e:
        raise InputError(f"{url}: file not found") from e
    except Exception as e:
        raise InputError(f"{url}: not a readable Parquet file: {e}") from e
    with pf:
        cols = list(columns) if columns is not None else None
        if cols is not None:
            missing = [c for c in cols if c not in pf.schema_arrow.names]
            if missing:
                raise InputError(f"{url}: Parquet file has no column(s) {missing}; it has {pf.schema_arrow.names}")
        seek = seek_row(pf.metadata, start)
        if start > seek.rows:
            raise StateError(f"{url}: doc cursor (row {start}) is past the end of the file ({seek.rows} rows)")
        if seek.group >= seek.groups:
            return
        row = start - seek.skip
        for batch in pf.iter_batches(
            PARQUET_ROWS_PER_BATCH, row_groups=list(range(seek.group, seek.groups)), columns=cols
        ):
            records = batch.to_pylist()
            skip = max(0, start - row)
            for i, record in enumerate(records[skip:], row + skip):
                yield RawDocument(i, f"row {i}", record)
            row += len(records)


def _read_arrow(url: str, start: int, columns: Sequence[str] | None) -> Iterator[RawDocument]:
    """Arrow IPC (what Hugging Face ``save_to_disk`` writes): the cursor is a row index;
    reopening walks the record batches before it without decoding their rows."""
    import pyarrow as pa

    try:
        source: Any = pa.memory_map(url) if not is_remote(url) else pa.py_buffer(open_url(url, decompress=False).read())
    except FileNotFoundError as e:
        raise InputError(f"{url}: file not found") from e
    try:
        reader: Any = pa.ipc.open_stream(source)
        batches: Iterator[Any] = iter(reader)
        schema = reader.schema
    except pa.ArrowInvalid:
        try:
            file_reader = pa.ipc.open_file(source)
        except pa.ArrowInvalid as e:
            raise InputError(f"{url}: not an Arrow IPC stream or file: {e}") from e
        schema = file_reader.schema
        batches = (file_reader.get_batch(i) for i in range(file_reader.num_record_batches))
    cols = list(columns) if columns is not None else None
    if cols is not None:
        missing = [c for c in cols if c not in schema.names]
        if missing:
            raise InputError(f"{url}: Arrow file has no column(s) {missing}; it has {schema.names}")
    row = 0
    for batch in batches:
        if row + batch.num_rows <= start:
            row += batch.num_rows
            continue
        records = (batch.select(cols) if cols is not None else batch).to_pylist()
        skip = max(0, start - row)
        for i, record in enumerate(records[skip:], row + skip):
            yield RawDocument(i, f"row {i}", record)
        row += batch.num_rows
    if start > row:
        raise StateError(f"{url}: doc cursor (row {start}) is past the end of the file ({row} rows)")


def _read_text(url: str, start: int, text_field: str) -> Iterator[RawDocument]:
    """Plain text: the whole file is one document, cursor 0."""
    if start > 0:
        raise StateError(f"{url}: doc cursor {start} is past the end of a plain text file (one document, cursor 0)")
    record: dict[str, Any] | ParseFailure
    with open_url(url, decompress=True) as f:
        try:
            data = f.read()
        except Exception as e:
            failure = _break_of(e) if is_compressed(url) else None
            if failure is None:
                raise
            yield RawDocument(0, "document", failure)
            return
    try:
        record = {text_field: data.decode("utf-8")}
    except UnicodeDecodeError as e:
        record = ParseFailure(SkipReason.INVALID_UTF8, f"invalid UTF-8 at byte {e.start}")
    yield RawDocument(0, "document", record)


def _read_memory(shard: Shard, start: int, text_field: str) -> Iterator[RawDocument]:
    """In-memory sources: the cursor is an item index (O(1) for sequences)."""
    data = shard.data
    if not callable(data) and hasattr(data, "__len__") and start > len(data):
        raise StateError(f"{shard.url}: doc cursor (item {start}) is past the end of the source ({len(data)} items)")
    if callable(data):
        items: Iterable[Any] = itertools.islice(data(), start, None)
    elif _is_hf_dataset(data):
        items = _hf_rows(data, start)
    elif isinstance(data, Sequence):
        items = (data[i] for i in range(start, len(data)))
    else:
        raise ConfigError(f"{shard.url}: in-memory source must be a sequence or a callable returning an iterable")
    for i, item in enumerate(items, start):
        yield RawDocument(i, f"item {i}", _as_record(item, text_field))


def _as_record(item: Any, text_field: str) -> dict[str, Any] | ParseFailure:
    if isinstance(item, dict):
        return item
    if isinstance(item, str):
        return {text_field: item}
    return ParseFailure(SkipReason.NOT_AN_OBJECT, f"expected a dict or str, got {type(item).__name__}")


def _is_hf_dataset(data: Any) -> bool:
    return type(data).__module__.startswith("datasets.") and hasattr(data, "column_names")


def _hf_rows(data: Any, start: int, block: int = 1000) -> Iterator[dict[str, Any]]:
    """Rows of a Hugging Face ``datasets.Dataset`` read in column slices, not one by one."""
    n = len(data)
    for lo in range(start, n, block):
        cols = data[lo : min(lo + block, n)]
        names = list(cols)
        for values in zip(*(cols[k] for k in names)):
            yield dict(zip(names, values))

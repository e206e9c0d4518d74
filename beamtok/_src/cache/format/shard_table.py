"""The shard entries of a large cache as a columnar table beside its manifest.

A manifest that lists every shard inline costs every reader the parse of all of it: at 100,000
shards the JSON is ~50 MB and its parsed tree ~130 MB per reader (times its DataLoader
workers). Past ``INLINE_SHARDS`` shards the entries go to ``shards.arrow`` (Arrow IPC, one
column per field) and the manifest names it with its SHA-256. A reader maps the table and
builds a shard's entry only when asked; whole columns (row counts, URLs, files) are read as
columns. Smaller caches keep their entries inline, as before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import pyarrow as pa

from beamtok._src.base.errors import CacheError
from beamtok._src.cache.format.manifest_entry import ShardEntry
from beamtok._src.cache.format.storage import Storage, check_relative

__all__ = ["INLINE_SHARDS", "SHARD_TABLE", "ShardTable", "read_shard_table", "write_shard_table"]

SHARD_TABLE = "shards.arrow"
INLINE_SHARDS = 10_000  # more shards than this: entries in the table, not the manifest

_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("url", pa.string()),
        ("source_size", pa.int64()),
        ("file", pa.string()),
        ("bytes", pa.int64()),
        ("sha256", pa.string()),
        ("rows", pa.int64()),
        ("tokens", pa.int64()),
        ("pad_tokens", pa.int64()),
        ("documents", pa.string()),  # the counts as JSON: read for one shard at a time
        ("fingerprint", pa.string()),
        ("footer_sha256", pa.string()),
    ]
)


def write_shard_table(storage: Storage, entries: Sequence[ShardEntry]) -> dict[str, Any]:
    """Write the entries' table; return what the manifest records of it."""
    columns = {name: [getattr(e, name) for e in entries] for name in _SCHEMA.names}
    columns["documents"] = [json.dumps(d, sort_keys=True) for d in columns["documents"]]
    table = pa.table(columns, schema=_SCHEMA)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, _SCHEMA) as writer:
        writer.write_table(table)
    blob = sink.getvalue().to_pybytes()
    storage.write_bytes(SHARD_TABLE, blob)
    return {"file": SHARD_TABLE, "shards": len(entries), "bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}


def read_shard_table(storage: Storage, recorded: Any, where: str) -> ShardTable:
    """The table a manifest names, checked against its recorded size and shard count (its
    SHA-256 by ``beamtok verify``, as shard files are: hashing would page in every column
    a reader never needs). A local table is memory-mapped: columns nobody reads cost no memory."""
    if not isinstance(recorded, dict) or set(recorded) != {"file", "shards", "bytes", "sha256"}:
        raise CacheError(f"{where}: malformed shard_table record {recorded!r}")
    check_relative(recorded["file"])
    if not storage.exists(recorded["file"]):
        raise CacheError(
            f"{storage.display(recorded['file'])}: missing (the manifest lists the shards there); re-run `beamtok cache`"
        )
    blob = storage.read_buffer(recorded["file"])
    if blob.size != recorded["bytes"]:
        raise CacheError(
            f"{storage.display(recorded['file'])}: {blob.size} bytes, but the manifest says {recorded['bytes']}; run `beamtok verify`"
        )
    try:
        table = pa.ipc.open_file(blob).read_all()
    except pa.ArrowInvalid as e:
        raise CacheError(f"{storage.display(recorded['file'])}: unreadable: {e}") from e
    if table.schema != _SCHEMA or table.num_rows != recorded["shards"]:
        raise CacheError(f"{storage.display(recorded['file'])}: not a shard table of {recorded['shards']} shards")
    shards = ShardTable(table, storage.display(recorded["file"]))
    if not np.array_equal(shards.column("index"), np.arange(len(shards))):
        raise CacheError(f"{where}: shard entries are not numbered 0..{len(shards) - 1}")
    return shards


class ShardTable(Sequence[ShardEntry]):
    """Shard entries held as columns; an entry is built when it is asked for."""

    def __init__(self, table: pa.Table, where: str = SHARD_TABLE) -> None:
        self.where = where
        self._columns = {name: _one_chunk(table.column(name)) for name in table.column_names}
        self._length = table.num_rows
        self._numbers: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, i: int) -> ShardEntry: ...

    @overload
    def __getitem__(self, i: slice) -> list[ShardEntry]: ...

    def __getitem__(self, i: int | slice) -> ShardEntry | list[ShardEntry]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._length))]
        if not -self._length <= i < self._length:
            raise IndexError(i)
        i %= self._length
        try:
            values = {name: column[i].as_py() for name, column in self._columns.items()}
            values["documents"] = json.loads(values["documents"])
        except (UnicodeDecodeError, ValueError) as e:
            raise CacheError(f"{self.where}: shard entry {i} is unreadable ({e}); run `beamtok verify`") from None
        entry = ShardEntry(**values)
        check_relative(entry.file)
        return entry

    def __iter__(self) -> Iterator[ShardEntry]:
        for i in range(self._length):
            yield self[i]

    def distinct(self, name: str) -> set[Any]:
        """The distinct values of a column (computed in Arrow, no value per row in Python)."""
        import pyarrow.compute as pc

        return set(pc.unique(self._columns[name]).to_pylist())

    def column(self, name: str) -> Any:
        """A whole column: numbers as a numpy array, text as a list."""
        column = self._columns[name]
        if pa.types.is_integer(column.type):
            if name not in self._numbers:
                self._numbers[name] = column.to_numpy(zero_copy_only=False)
            return self._numbers[name]
        return column.to_pylist()


def table_sha256(storage: Storage, recorded: dict[str, Any]) -> str:
    """The SHA-256 of the table file a manifest names (``beamtok verify`` compares it)."""
    return hashlib.sha256(memoryview(storage.read_buffer(recorded["file"]))).hexdigest()


def _one_chunk(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array: its only chunk as it is (no copy), or the chunks joined."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()

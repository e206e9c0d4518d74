"""Read a cache back as the very same stream of examples, with the same cursors.

A cache shard's rows are its examples in order; row ``i`` is example ``i``, so a shard cursor
``(index, doc, token)`` reopens at row ``index`` by seeking to its row group (found from the
Parquet metadata, never by scanning). The cursor after a row is the next row's provenance, or
``done`` after the last row, exactly as the shard processing reports it on the fly.

A cache built without packing (one document a row) can be packed at read time: its rows are
then documents (:meth:`Cache.documents`), fed to the same packer the on-the-fly step uses (see
``beamtok._src.cache.read.backend``), and reopened by doc cursor (the row group is found from the
``doc`` column's statistics).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq

from beamtok._src.base.errors import CacheError, StateError
from beamtok._src.base.lookahead import lookahead
from beamtok._src.cache.format.manifest import Manifest, ShardEntry, read_manifest
from beamtok._src.cache.format.schema import batch_to_block
from beamtok._src.cache.format.storage import Storage
from beamtok._src.cache.read.read_ahead import BlockReader, ReadAhead, one_batch, row_groups
from beamtok._src.core.spec import Spec
from beamtok._src.shards.items import END_OF_SHARD, DocCounts, DocItem, Produced, ShardCursor
from beamtok._src.shards.rows import RowBlock
from beamtok._src.shards.spans import RowSpan, SpanReader
from beamtok._src.sources.urls import Shard
from beamtok._src.transforms.sft import TokenDoc
from beamtok._src.transforms.tokenize import Tokenizer
from beamtok._src.transforms.tokenizer_registry import register_tokenizer

__all__ = ["Cache", "size_problem"]

DECODING_AHEAD = (
    2  # row groups decoded at once ahead of the stream, on the process's prefetch pool (beamtok._src.base.prefetch)
)


class Cache:
    """An opened cache directory: its manifest, and readers for its shards."""

    def __init__(self, directory: str, *, fingerprint: str | None = None, check_files: bool = True) -> None:
        """Open ``directory``'s manifest; refuse it if it was built with another spec than
        ``fingerprint`` (when given) or, with ``check_files``, if a shard file is missing or
        not the size the manifest says: every file at open (not where a training run would
        meet it), or, for a cache large enough to keep its entries in a shard table, each file
        when this process first opens it (a reader of a 100,000-shard cache reads a few dozen,
        and thousands of ranks listing a shared file system at once is a load of its own).
        ``beamtok verify`` checks all.

        Args:
            directory: The cache directory (local or an object store URL).
            fingerprint: The spec fingerprint the cache must have; None takes whatever it holds.
            check_files: Check the shard files' sizes against the manifest.
        """
        self.storage = Storage(directory)
        self.manifest: Manifest = read_manifest(self.storage)
        self.spec = Spec.from_json(self.manifest.spec)
        self.supervised = self.spec.supervised
        if fingerprint is not None and self.manifest.fingerprint != fingerprint:
            raise CacheError(
                f"{directory} was built with spec {self.manifest.fingerprint}, not the requested {fingerprint}"
            )
        if self.manifest.distinct("fingerprint") - {
            "",
            self.manifest.fingerprint,
        }:  # columns: a large cache builds no entry here
            for entry in self.manifest.shards:
                if entry.fingerprint and entry.fingerprint != self.manifest.fingerprint:
                    raise CacheError(
                        f"{self.storage.display(entry.file)}: built with spec {entry.fingerprint}, not the manifest's {self.manifest.fingerprint}"
                    )
        self._size_checked: set[int] | None = None  # a large cache's files checked so far; None: no check at first open
        if check_files and self.manifest.shard_table is not None:
            self._size_checked = set()
        elif check_files:
            sizes = self.file_sizes()
            for i, (file, expected) in enumerate(zip(self.manifest.column("file"), self.manifest.column("bytes"))):
                if sizes[file] != expected:
                    self._refuse_size(self.manifest.shards[i], sizes[file])

    def _refuse_size(self, entry: ShardEntry, size: int | None) -> None:
        problem = size_problem(entry, size)
        if problem is not None:
            hint = "re-run `beamtok cache` to rebuild it" if size is None else "run `beamtok verify`"
            raise CacheError(f"{self.storage.display(entry.file)}: {problem}; {hint}")

    @classmethod
    def of_entries(cls, directory: str, spec: Spec, entries: list[ShardEntry]) -> Cache:
        """The finished shards of a cache still being written (no manifest yet).

        Args:
            directory: The cache directory (a local path or URL).
            spec: The spec the cache is being built with.
            entries: The manifest entries of the shards finished so far.
        """
        cache = cls.__new__(cls)
        cache.storage = Storage(directory)
        cache.manifest = Manifest(spec.to_json(), spec.fingerprint, entries)
        cache.spec = spec
        cache.supervised = spec.supervised
        cache._size_checked = None
        return cache

    def file_sizes(self) -> dict[str, int | None]:
        """Each shard file's size (None when missing), from one listing per directory."""
        listed: dict[str, dict[str, int]] = {}
        sizes: dict[str, int | None] = {}
        for file in self.manifest.column("file"):
            folder, _, name = file.rpartition("/")
            if folder not in listed:
                listed[folder] = self.storage.sizes(folder)
            sizes[file] = listed[folder].get(name)
        return sizes

    @property
    def directory(self) -> str:
        return self.storage.url

    @property
    def shards(self) -> list[Shard]:
        """The shards as the on-the-fly dataset numbered them, with their original URLs."""
        return [Shard(i, url) for i, url in enumerate(self.manifest.column("url"))]

    def tokenizer(self) -> Tokenizer:
        """The tokenizer the cache was built with, rebuilt from the copy stored in the cache."""
        if self.manifest.tokenizer_file is None:
            raise CacheError(f"{self.directory}: the cache holds no tokenizer")
        blob = json.loads(self.storage.read_bytes(self.manifest.tokenizer_file))
        return register_tokenizer(Tokenizer.from_serialized(blob))

    def cursor_at(self, shard_index: int, row: int) -> ShardCursor:
        """The shard cursor of one row (reads that row's provenance only).

        Args:
            shard_index: The shard's index in the manifest.
            row: The row's index within the shard; past the last row, the shard's done cursor.
        """
        entry = self._entry(Shard(shard_index, ""))
        if row >= entry.rows:
            return ShardCursor(entry.rows, 0, 0, True)
        for block in self._blocks(entry, row, ReadAhead()):
            return ShardCursor(block.indices[0], block.docs[0], block.tokens[0])
        raise CacheError(f"{self.storage.display(entry.file)}: has fewer rows than its manifest says")

    # ---------------------------------------------------------------- rows

    def open_rows(self, shard: Shard, cursor: ShardCursor, ahead: ReadAhead | None = None) -> Iterator[Produced]:
        """Examples of ``shard`` from ``cursor`` on, each with the cursor after it (the next
        row's provenance, or ``done`` after the last row).

        Args:
            shard: The shard to read.
            cursor: Where to start; a cursor from another cache raises StateError.
            ahead: The stream's read-ahead (its upcoming shards are decoded early).
        """
        return SpanReader(self.open_spans(shard, cursor, ahead))

    def open_spans(self, shard: Shard, cursor: ShardCursor, ahead: ReadAhead | None = None) -> Iterator[RowSpan]:
        """The rows of ``shard`` from ``cursor`` on, a decoded row group at a time, each span
        with the cursor after its last row.

        Args:
            shard: The shard to read.
            cursor: Where in it to start.
            ahead: The stream's read-ahead (its upcoming shards are decoded early), or None.
        """
        entry = self._entry(shard)
        if cursor.done:
            return
        if cursor.index > entry.rows:
            raise StateError(f"shard {shard.index}: cursor at example {cursor.index}, but the shard has {entry.rows}")
        if entry.rows == 0:
            yield RowSpan(None, ShardCursor(0, 0, 0, True), DocCounts.from_json(entry.documents))
            return
        first = True
        for block in self._blocks(entry, cursor.index, ahead or ReadAhead()):
            if not len(block):
                continue
            # A shard's start cursor is (0, 0, 0) whatever row 0's provenance; any other must match.
            if first and cursor != ShardCursor() and (block.docs[0], block.tokens[0]) != (cursor.doc, cursor.token):
                raise StateError(
                    f"shard {shard.index}: the state's cursor (example {cursor.index}, doc {cursor.doc}, token {cursor.token}) "
                    f"does not match the cache's row {block.indices[0]} (doc {block.docs[0]}, token {block.tokens[0]}): the state is from other data"
                )
            first = False
            yield RowSpan(block)  # the cursor after its last row is the next span's first row

    def all_blocks(self) -> Iterator[RowBlock]:
        """Every row of the cache, shard after shard, a decoded row group at a time (the next
        shards' first row groups decoded ahead)."""
        ahead = ReadAhead()
        entries = self.manifest.shards
        try:
            for number, entry in enumerate(entries):
                ahead.upcoming = [
                    (Shard(e.index, e.url), ShardCursor()) for e in entries[number + 1 : number + 3] if e.rows
                ]
                if entry.rows:
                    yield from self._blocks(entry, 0, ahead)
        finally:
            ahead.stop()

    def _blocks(self, entry: ShardEntry, start_row: int, ahead: ReadAhead) -> Iterator[RowBlock]:
        """Decoded row groups from row ``start_row`` on (started early if the shard was upcoming)."""
        key = (entry.index, start_row)
        reader = ahead.started.pop(key, None)
        if reader is None:
            reader = BlockReader(self._parquet(entry), self.storage.display(entry.file), self.supervised, start_row)
        ahead.reading.append(reader)
        try:
            self._start_upcoming(ahead)
            for block in reader.blocks:
                self._start_upcoming(ahead)  # a helper thread is free: on to the next row group or shard
                yield block
        finally:
            ahead.reading.remove(reader)
            reader.close()

    def _start_upcoming(self, ahead: ReadAhead) -> None:
        """Begin decoding the upcoming shards' first row groups while fewer than
        ``DECODING_AHEAD`` row groups are being decoded (a problem with a file is left for
        the ``open_spans`` that reaches it to report)."""
        busy = sum(r.blocks.pending for r in ahead.reading) + sum(r.blocks.pending for r in ahead.started.values())
        for shard, cursor in ahead.upcoming:
            if busy >= DECODING_AHEAD or len(ahead.started) > DECODING_AHEAD:
                return
            entry = self._entry(shard)
            key = (entry.index, cursor.index)
            if cursor.done or entry.rows == 0 or key in ahead.started:
                continue
            try:
                ahead.started[key] = BlockReader(
                    self._parquet(entry), self.storage.display(entry.file), self.supervised, cursor.index
                )
            except (CacheError, OSError):
                return
            busy += 1

    def open_shard_file(self, shard_index: int) -> Any:
        """The ``pyarrow.parquet.ParquetFile`` of a shard, its footer checked (close it).

        Args:
            shard_index: The shard's index in the manifest.
        """
        return self._parquet(self._entry(Shard(shard_index, "")))

    def decode_row_group(self, parquet_file: Any, shard_index: int, group: int) -> RowBlock:
        """One row group of an open shard file, decoded into examples.

        Args:
            parquet_file: The file ``open_shard_file`` returned.
            shard_index: The shard's index in the manifest (names the file in errors).
            group: The row group's index in the file.
        """
        where = self.storage.display(self._entry(Shard(shard_index, "")).file)
        (table,) = row_groups(parquet_file, range(group, group + 1), where)
        return batch_to_block(one_batch(table), self.supervised)

    def _parquet(self, entry: ShardEntry) -> Any:
        """Open a shard file, checking its footer's SHA-256; its pages are checked against
        their CRCs as they are read (sizes were checked when the cache was opened, or are
        checked here on a large cache's first open of the file; a full SHA-256 of every file
        is `beamtok verify`)."""
        where = self.storage.display(entry.file)
        if self._size_checked is not None and entry.index not in self._size_checked:
            self._refuse_size(entry, self.storage.size(entry.file))
            self._size_checked.add(entry.index)
        if entry.footer_sha256 and self.storage.parquet_footer_sha256(entry.file) != entry.footer_sha256:
            raise CacheError(
                f"{where}: Parquet footer checksum mismatch (the file was altered after it was written); run `beamtok verify`"
            )
        source = self.storage.open_input(entry.file)
        try:
            return pq.ParquetFile(source, page_checksum_verification=True)
        except Exception as e:
            raise CacheError(f"{where}: not a readable Parquet file ({e}); run `beamtok verify`") from e

    def _entry(self, shard: Shard) -> ShardEntry:
        entries = self.manifest.shards
        if 0 <= shard.index < len(entries) and entries[shard.index].index == shard.index:
            return entries[shard.index]
        for entry in entries:  # a cache still being written holds some shards only
            if entry.index == shard.index:
                return entry
        raise StateError(f"shard {shard.index} does not exist in the cache ({len(entries)} shards)")

    # ------------------------------------------------------- document rows

    def documents(self, shard: Shard, start_doc: int) -> Iterator[DocItem]:
        """The document rows of an unpacked cache from a doc cursor on, as the packer's
        input. A row's counts cover the skipped documents up to the next row.

        Args:
            shard: The shard to read.
            start_doc: The first document to give (its index in the shard's input).
        """
        entry = self._entry(shard)
        if entry.rows == 0:
            yield DocItem(0, None, DocCounts.from_json(entry.documents), END_OF_SHARD)
            return
        rows = (
            (example, count)
            for block in self._document_blocks(entry, start_doc)
            for example, count in zip(block.examples, block.counts)
            if example["doc"] >= start_doc
        )
        for (example, count), following in lookahead(rows):
            through = END_OF_SHARD if following is None else following[0]["doc"] - 1
            yield DocItem(example["doc"], _token_doc(example), count, through)

    def _document_blocks(self, entry: ShardEntry, start_doc: int) -> Iterator[RowBlock]:
        with self._parquet(entry) as pf:
            doc_col = pf.schema_arrow.get_field_index("doc")
            first = 0
            for i in range(pf.num_row_groups):  # the last group whose smallest doc is <= start_doc
                stats = pf.metadata.row_group(i).column(doc_col).statistics
                if stats is not None and stats.has_min_max and stats.min <= start_doc:
                    first = i
            for table in row_groups(pf, range(first, pf.num_row_groups), self.storage.display(entry.file)):
                yield batch_to_block(one_batch(table))


def size_problem(entry: ShardEntry, size: int | None) -> str | None:
    """What is wrong with a shard file of ``size`` bytes (None: missing), or None."""
    if size is None:
        return "shard file is missing"
    if size != entry.bytes:
        return f"{size} bytes, but the manifest says {entry.bytes} (truncated or replaced)"
    return None


def _token_doc(row: dict[str, Any]) -> TokenDoc:
    """A document row of an unpacked cache as the packer's input (all-ones masks dropped, as on the fly)."""
    mask = row["loss_mask"]
    return TokenDoc(row["input_ids"], None if mask.all() else mask)

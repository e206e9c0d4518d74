"""Cache while streaming: the on-the-fly stream, writing each shard it reads whole into a cache.

``Dataset.cache_as_you_go(directory)`` reads a shard from ``directory`` when an earlier pass
(this run's previous epoch, an earlier run, another rank, or a Beam build) finished it, and
otherwise runs the shard processing as usual while a background thread writes the examples,
as they are handed out, into that shard's Parquet file: the same writer, so the same bytes
a Beam build writes. The stream is the same in every case (a cache row is the example the
shard processing yields, with the same cursor), so states cross freely between caching,
cached and on-the-fly runs.

A shard is written only when it is read from its start to its end; a shard opened at a
resumed cursor, or left before its end, is not (its temporary file is dropped). The
training loop never waits for the writer: examples go through a bounded queue, 64 at a time,
and when the writer falls 4,096 examples behind the shard is given up (and tokenized again
next time). The
manifest is written when the last shard lands, so a partly written cache never looks
complete; ``beamtok cache`` with the same options completes it with Beam.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import queue
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from beamtok._src.base.errors import CacheError
from beamtok._src.cache.build.output import other_cache
from beamtok._src.cache.build.writer import completed_entry, write_rows
from beamtok._src.cache.format.manifest import TOKENIZER_FILE, Manifest, ShardEntry, versions, write_manifest
from beamtok._src.cache.format.storage import Storage
from beamtok._src.cache.read.reader import Cache
from beamtok._src.core.spec import Spec
from beamtok._src.production.on_the_fly import OnTheFlyOrigin
from beamtok._src.production.protocol import ShardBackend
from beamtok._src.shards.items import Produced, ShardCursor
from beamtok._src.sources.urls import Shard

__all__ = ["CachingBackend", "CachingOrigin"]

log = logging.getLogger(__name__)

HANDOFF = 64  # examples handed to a writer at once: one thread wake-up per 64, not per example
QUEUE_ITEMS = 64  # handoffs a shard's writer may fall behind (4,096 examples) before the shard is given up
_DONE = object()
_GIVE_UP = object()


class _GiveUp(Exception):
    """The shard's write is abandoned (its temporary file is removed)."""


_LIVE: weakref.WeakSet[_ShardWriter] = weakref.WeakSet()


@atexit.register
def _settle_writers() -> None:
    """Before the interpreter shuts down: let shards read whole finish landing, give up the
    others (a writer thread still inside pyarrow at finalization would abort the process)."""
    for writer in list(_LIVE):
        if writer.is_alive() and not writer.finishing:
            writer.offer(_GIVE_UP)
    for writer in list(_LIVE):
        writer.join(timeout=120)


class _ShardWriter(threading.Thread):
    """Writes one shard from the examples the stream hands it."""

    def __init__(self, storage: Storage, shard: Shard, spec: Spec, layout: dict[str, Any], on_written: Any) -> None:
        super().__init__(name=f"beamtok-cache-shard-{shard.index}", daemon=True)
        self.storage = storage
        self.shard = shard
        self.spec = spec
        self.layout = layout
        self.on_written = on_written
        self.items: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_ITEMS)
        self.given_up = False
        self.finishing = False  # the whole shard was handed over
        _LIVE.add(self)

    def offer(self, item: Any) -> None:
        """Hand an item over without waiting; a full queue gives the shard up."""
        if self.given_up:
            return
        if item is _DONE:
            self.finishing = True
        try:
            self.items.put_nowait(item)
        except queue.Full:
            self.given_up = True
            log.debug(
                "shard %d: the cache writer fell %d examples behind; not caching it this time",
                self.shard.index,
                QUEUE_ITEMS * HANDOFF,
            )
            with contextlib.suppress(queue.Full):
                self.items.get_nowait()  # make room for the message that stops the writer
                self.items.put_nowait(_GIVE_UP)

    def _rows(self) -> Iterator[Produced]:
        while True:
            item = self.items.get()
            if item is _DONE:
                return
            if item is _GIVE_UP:
                raise _GiveUp
            yield from item

    def run(self) -> None:
        seq_len = self.spec.pack.seq_len if self.spec.pack is not None else None
        try:
            entry = write_rows(
                self.storage,
                self.shard,
                self._rows(),
                self.spec.fingerprint,
                seq_len,
                row_group_rows=self.layout.get("row_group_rows"),
                row_group_bytes=self.layout.get("row_group_bytes"),
                parquet_compat=self.layout.get("parquet_compat", False),
            )
        except _GiveUp:
            return
        except Exception:  # a full disk must not stop training: the shard is simply not cached
            log.warning(
                "shard %d: writing it to the cache failed; it will be tokenized again next time",
                self.shard.index,
                exc_info=True,
            )
            return
        self.on_written(entry)


@dataclass
class CachingBackend:
    """Cached shards from the cache; the others from ``inner``, written as they stream."""

    storage: Storage
    spec: Spec
    shards: Sequence[Shard]
    inner: ShardBackend
    layout: dict[str, Any]
    writers: list[_ShardWriter] = field(default_factory=list)
    has_spans = False  # shards change source as they are cached: one example at a time

    def open_spans(self, shard: Shard, cursor: ShardCursor) -> None:
        return None

    def open(self, shard: Shard, cursor: ShardCursor) -> Iterator[Produced]:
        entry = completed_entry(
            self.storage, shard, self.spec.fingerprint, check_file=False
        )  # reads check footers and pages
        if entry is not None:
            return Cache.of_entries(self.storage.url, self.spec, [entry]).open_rows(shard, cursor)
        if cursor != ShardCursor():
            return self.inner.open(shard, cursor)  # a resumed shard is not read whole: not cached
        return self._teed(shard, self.inner.open(shard, cursor))

    def _teed(self, shard: Shard, rows: Iterator[Produced]) -> Iterator[Produced]:
        writer = _ShardWriter(self.storage, shard, self.spec, self.layout, self._written)
        self.writers = [w for w in self.writers if w.is_alive()] + [writer]
        writer.start()
        finished = False
        pending: list[Produced] = []
        try:
            for produced in rows:
                pending.append(produced)
                if len(pending) >= HANDOFF:
                    writer.offer(pending)
                    pending = []
                yield produced
            finished = True
        finally:
            if finished:
                writer.offer(pending)
            writer.offer(_DONE if finished else _GIVE_UP)

    def _written(self, entry: ShardEntry) -> None:
        """After a shard lands: write the manifest when every shard has."""
        entries = []
        for shard in self.shards:
            done = (
                entry
                if shard.index == entry.index
                else completed_entry(self.storage, shard, self.spec.fingerprint, check_file=False)
            )
            if done is None:
                return
            entries.append(done)
        manifest = Manifest(
            self.spec.to_json(), self.spec.fingerprint, entries, versions(), TOKENIZER_FILE, input_root=_cwd()
        )
        write_manifest(self.storage, manifest)
        log.info("cache %s is complete (%d shards)", self.storage.url, len(entries))

    def wait(self, timeout: float | None = None) -> None:
        """Let the shards being written finish (tests, and the end of a run)."""
        for writer in self.writers:
            writer.join(timeout)

    def prefetch(self, upcoming: Sequence[tuple[Shard, ShardCursor]]) -> None:
        self.inner.prefetch(
            [(s, c) for s, c in upcoming if completed_entry(self.storage, s, self.spec.fingerprint) is None]
        )

    def close(self) -> None:
        """Stop reading: shards still being written are given up (their files never appear)."""
        for writer in self.writers:
            if writer.is_alive():
                writer.offer(_GIVE_UP)
        self.inner.close()

    def rows(self, shard: Shard) -> int | None:
        return None  # not known for shards not cached yet

    def cursor_at(self, shard: Shard, row: int) -> ShardCursor:
        return self.inner.cursor_at(shard, row)


def _cwd() -> str:
    import os

    return os.getcwd()


@dataclass(frozen=True)
class CachingOrigin(OnTheFlyOrigin):
    """Files read now, and cached as they are read whole."""

    directory: str = ""
    shards: tuple[Shard, ...] = ()
    layout: dict[str, Any] = field(default_factory=dict, compare=False)

    def backend(self, spec: Spec, workers: int) -> ShardBackend:
        storage = Storage(self.directory)
        problem = other_cache(storage, spec, self.shards, parquet_compat=self.layout.get("parquet_compat", False))
        if problem is not None:
            raise CacheError(
                f"{storage.url} {problem}; cache_as_you_go() never replaces a cache: choose another directory"
            )
        if not storage.exists(TOKENIZER_FILE):
            from beamtok._src.transforms.tokenizer_registry import serialize_tokenizers

            storage.write_bytes(TOKENIZER_FILE, json.dumps(serialize_tokenizers(spec.tokenizers)[-1]).encode())
        return CachingBackend(storage, spec, self.shards, super().backend(spec, workers), self.layout)

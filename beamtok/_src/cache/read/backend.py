"""Shard backends over a cache: its packed rows as they are, or its document rows packed at
read time; and the origin a ``Dataset.from_cache`` holds.

Both backends yield exactly what the shard processing yields on the fly for the same spec,
with the same cursors, so states cross between the modes. The repacked backend feeds
document rows to the very packer the on-the-fly step uses (``beamtok._src.shards.packing``), so packing
counts (``too_long``, truncated and dropped tokens) agree as well.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from beamtok._src.base.errors import ConfigError
from beamtok._src.cache.read.random_access import RowAccess
from beamtok._src.cache.read.read_ahead import ReadAhead
from beamtok._src.cache.read.reader import Cache
from beamtok._src.cache.read.shuffle_rows import ShuffleRows
from beamtok._src.core.spec import PackSpec, Spec
from beamtok._src.production.decode_pool import DecodePool
from beamtok._src.production.protocol import RowSource, SequentialBackend, ShardBackend
from beamtok._src.shards.items import Produced, ShardCursor
from beamtok._src.shards.packing import packed
from beamtok._src.shards.spans import RowSpan
from beamtok._src.sources.urls import Shard

__all__ = ["CacheOrigin", "PackedCache", "RepackedCache"]


class PackedCache(SequentialBackend):
    """A cache's rows as its examples; row counts known, so the stream can seek by example."""

    has_spans = True

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.ahead = ReadAhead()  # this stream's own: streams over one cache do not share it

    def open(self, shard: Shard, cursor: ShardCursor) -> Iterator[Produced]:
        return self.cache.open_rows(shard, cursor, self.ahead)

    def open_spans(self, shard: Shard, cursor: ShardCursor) -> Iterator[RowSpan]:
        return self.cache.open_spans(shard, cursor, self.ahead)

    def prefetch(self, upcoming: Sequence[tuple[Shard, ShardCursor]]) -> None:
        """Decode the next shards' first row groups while the stream reads the current one
        (up to ``DECODING_AHEAD`` row groups at once)."""
        self.ahead.upcoming = list(upcoming)

    def close(self) -> None:
        self.ahead.stop()

    def rows(self, shard: Shard) -> int | None:
        return self.cache.manifest.shard_rows(shard.index)

    def cursor_at(self, shard: Shard, row: int) -> ShardCursor:
        return self.cache.cursor_at(shard.index, row)


class RepackedCache(SequentialBackend):
    """An unpacked cache's document rows, packed now with ``pack``."""

    def __init__(self, cache: Cache, pack: PackSpec, supervised: bool) -> None:
        self.cache = cache
        self.pack = pack
        self.supervised = supervised

    def open(self, shard: Shard, cursor: ShardCursor) -> Iterator[Produced]:
        if cursor.done:
            return iter(())
        return packed(shard.index, self.cache.documents(shard, cursor.doc), self.pack, self.supervised, cursor)


@dataclass(frozen=True)
class CacheOrigin:
    """A cache as the origin of a dataset's shards: its per-document steps were fixed when it
    was built; an unpacked (``--pack none``) cache may still be packed."""

    cache: Cache
    cached = True

    @classmethod
    def open(cls, directory: str, *, fingerprint: str | None = None) -> CacheOrigin:
        return cls(Cache(directory, fingerprint=fingerprint))

    @property
    def spec(self) -> Spec:
        return self.cache.spec

    @property
    def shards(self) -> list[Shard]:
        return self.cache.shards

    def check_step(self, name: str) -> None:
        raise ConfigError(f"{name}(): a cache's per-shard stages were fixed when it was built")

    def check_pack(self, name: str) -> None:
        if self.cache.spec.pack is not None:
            raise ConfigError(f"{name}(): the cache is already packed; build it with --pack none to pack at read time")

    def row_access(
        self, spec: Spec, local_copy: bool | str | None = None, pool: DecodePool | None = None
    ) -> RowSource | None:
        if spec.pack != self.cache.spec.pack:
            return None
        return ShuffleRows(self.cache, local_copy) if pool is None else RowAccess(self.cache, pool=pool)

    def backend(self, spec: Spec, workers: int) -> ShardBackend:
        if spec.pack == self.cache.spec.pack:
            return PackedCache(self.cache)
        assert spec.pack is not None and self.cache.spec.pack is None
        return RepackedCache(self.cache, spec.pack, spec.supervised)

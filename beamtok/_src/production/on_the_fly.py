"""Shards read and processed now: in this process, or in worker processes (``parallel()``)."""

from __future__ import annotations

from collections.abc import Iterator

from beamtok._src.core.spec import Spec
from beamtok._src.production.decode_pool import DecodePool
from beamtok._src.production.parallel import ParallelShards
from beamtok._src.production.protocol import RowSource, SequentialBackend, ShardBackend
from beamtok._src.production.shard_spans import shard_spans
from beamtok._src.production.workers import dataloader_worker
from beamtok._src.shards.column_chunker import packs_column_wise
from beamtok._src.shards.items import Produced, ShardCursor
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.shards.spans import RowSpan
from beamtok._src.sources.urls import Shard

__all__ = ["OnTheFly", "OnTheFlyOrigin"]


class OnTheFly(SequentialBackend):
    """Runs the shard processing now, in this process. Rows of ``concat_chunk`` are cut in
    blocks (``open_spans``, see ``beamtok._src.shards.column_chunker``), the same rows ``open``
    yields one at a time."""

    def __init__(self, spec: Spec) -> None:
        self.processor = ShardProcessor(spec)
        self.has_spans = spec.tokenized and packs_column_wise(spec.pack)

    def open(self, shard: Shard, cursor: ShardCursor) -> Iterator[Produced]:
        if cursor.done:
            return iter(())
        return self.processor.pack(shard.index, self.processor.documents(shard, cursor.doc), cursor)

    def open_spans(self, shard: Shard, cursor: ShardCursor) -> Iterator[RowSpan] | None:
        if not self.has_spans:
            return None
        return shard_spans(self.processor, shard, cursor)


class OnTheFlyOrigin:
    """Files (or in-memory data) read and processed shard by shard as the stream runs."""

    cached = False

    def check_step(self, name: str) -> None:
        return None

    def check_pack(self, name: str) -> None:
        return None

    def backend(self, spec: Spec, workers: int) -> ShardBackend:
        if workers and dataloader_worker()[1] == 1:  # DataLoader workers cannot fork workers of their own
            return ParallelShards(spec, workers)
        return OnTheFly(spec)

    def row_access(
        self, spec: Spec, local_copy: bool | str | None = None, pool: DecodePool | None = None
    ) -> RowSource | None:
        return None

"""A shard's rows as row blocks, for a backend that hands the stream blocks: cut column-wise
where the spec packs with ``concat_chunk``, else the shard processing's rows grouped."""

from __future__ import annotations

from collections.abc import Iterator

from beamtok._src.production.wire import spans_of
from beamtok._src.shards.column_chunker import ColumnChunker, packs_column_wise
from beamtok._src.shards.items import ShardCursor
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.shards.spans import RowSpan
from beamtok._src.sources.urls import Shard

__all__ = ["shard_spans"]


def shard_spans(processor: ShardProcessor, shard: Shard, cursor: ShardCursor) -> Iterator[RowSpan]:
    """``processor``'s rows of ``shard`` from ``cursor`` in blocks."""
    spec = processor.spec
    if not (spec.tokenized and packs_column_wise(spec.pack)):
        return spans_of(processor.run(shard, cursor))
    if cursor.done:
        return iter(())
    assert spec.pack is not None
    return ColumnChunker(shard.index, cursor, spec.pack, spec.supervised).spans(processor.documents(shard, cursor.doc))

"""Row groups of a cache's shard files read ahead of the consumer: the decoding of one shard
from a row on, a row group ahead on a helper thread (``BlockReader``), and one stream's readers
with the first row groups of the shards it opens next (``ReadAhead``)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from beamtok._src.base.errors import CacheError
from beamtok._src.base.prefetch import Prefetcher
from beamtok._src.cache.format.schema import batch_to_block
from beamtok._src.shards.items import ShardCursor
from beamtok._src.shards.rows import RowBlock
from beamtok._src.sources.row_groups import seek_row
from beamtok._src.sources.urls import Shard

__all__ = ["BlockReader", "ReadAhead", "one_batch", "read_row_group", "row_groups"]


class ReadAhead:
    """One stream's decoding ahead: the readers of its open shards, and the first row groups
    of the shards it opens next (``upcoming``), started while fewer than ``DECODING_AHEAD``
    row groups are being decoded. Dropped with its stream, it takes its threads along."""

    def __init__(self) -> None:
        self.upcoming: list[tuple[Shard, ShardCursor]] = []
        self.started: dict[tuple[int, int], BlockReader] = {}
        self.reading: list[BlockReader] = []

    def stop(self) -> None:
        """Close the shards started but not opened (open ones close with their readers)."""
        while self.started:
            self.started.popitem()[1].close()


class BlockReader:
    """A shard file's row groups from a row on, decoded one ahead on a helper thread while
    the consumer works through the current one."""

    def __init__(self, parquet_file: pq.ParquetFile, where: str, supervised: bool, start_row: int) -> None:
        """Start decoding.

        Args:
            parquet_file: The shard file, open (closed with the reader).
            where: The file as messages name it.
            supervised: Whether its rows carry loss masks (SFT and chat caches).
            start_row: The first row read.
        """
        self._file = pf = parquet_file
        seek = seek_row(pf.metadata, start_row)

        def decode(group: int) -> RowBlock:
            table = read_row_group(pf, group, where)
            if group == seek.group and seek.skip:
                table = table.slice(seek.skip)
            return batch_to_block(one_batch(table), supervised)

        self.blocks: Prefetcher[int, RowBlock] = Prefetcher(decode, range(seek.group, seek.groups))

    def close(self) -> None:
        self.blocks.close()
        self._file.close()


def row_groups(pf: pq.ParquetFile, groups: range, where: str) -> Iterator[pa.Table]:
    """The row groups ``groups`` of ``pf`` (``where`` names it in a CacheError)."""
    for group in groups:
        yield read_row_group(pf, group, where)


def read_row_group(pf: pq.ParquetFile, group: int, where: str) -> pa.Table:
    """Row group ``group`` of ``pf``, or a CacheError naming ``where`` for a corrupt one."""
    # Whole row groups: pyarrow decodes their columns in parallel, faster than iter_batches.
    try:
        return pf.read_row_group(group)
    except (OSError, pa.ArrowException) as e:
        raise CacheError(f"{where}: row group {group} is corrupt ({e}); run `beamtok verify`") from e


def one_batch(table: pa.Table) -> pa.RecordBatch:
    """``table``'s rows as one record batch."""
    return (
        table.combine_chunks().to_batches()[0]
        if table.num_rows
        else pa.RecordBatch.from_pylist([], schema=table.schema)
    )

"""Random access to a packed cache's rows by global row number, for the global shuffle.

Global row ``g`` is row ``g - start[s]`` of shard ``s`` (shards in order, row counts from the
manifest). Rows are served a batch at a time: each row group the batch needs is decoded once
and kept in an LRU cache of decoded groups bounded in bytes (and of open files), so a
permutation that revisits row groups reads each from disk once while they fit the budget; a
cache smaller than the budget is decoded once per reader. Small row groups (``beamtok cache
--row-group-rows``) keep the cost of a random row low when the cache does not fit. Several
caches read together (the sources of a mix) share one :class:`DecodePool`, so the budget
and the open files are per reader, not per cache.
"""

from __future__ import annotations

import bisect
import itertools
from typing import Any

import numpy as np

from beamtok.backends.decode_pool import DEFAULT_DECODE_BUDGET, ROW_OVERHEAD, DecodePool
from beamtok.cache.read.reader import Cache
from beamtok.shards.rows import RowBlock, gather_rows

__all__ = ["ROW_OVERHEAD", "RowAccess"]

DECODE_BUDGET = DEFAULT_DECODE_BUDGET  # bytes of decoded rows kept per reader (benchmarks set it)


class RowAccess:
    """Rows of a packed cache by global row number, through a bounded decode cache (its own,
    or a ``pool`` shared with other caches' row accesses)."""

    def __init__(self, cache: Cache, max_bytes: int | None = None, pool: DecodePool | None = None) -> None:
        self.cache = cache
        self.pool = DecodePool(DECODE_BUDGET if max_bytes is None else max_bytes) if pool is None else pool
        self._owns_pool = pool is None
        self._key = next(_KEYS)  # this cache's entries in a shared pool
        rows = [int(n) for n in cache.manifest.column("rows")]
        self.starts = [0, *itertools.accumulate(rows)]
        self.total = self.starts[-1]
        self._group_ends: dict[int, list[int]] = {}

    @property
    def groups_decoded(self) -> int:
        return self.pool.groups_decoded

    def block(self, global_rows: np.ndarray) -> RowBlock:
        """These rows, in the order given, as one block."""
        located = [self._locate(int(g)) for g in global_rows]
        needed = sorted(set((shard, group) for shard, group, _ in located))
        blocks = {key: self._block(*key) for key in needed}
        return gather_rows([(blocks[(s, g)], i) for s, g, i in located])

    def close(self) -> None:
        if self._owns_pool:
            self.pool.close()

    def _locate(self, row: int) -> tuple[int, int, int]:
        shard = bisect.bisect_right(self.starts, row) - 1
        local = row - self.starts[shard]
        ends = self._ends(shard)
        group = bisect.bisect_right(ends, local)
        return shard, group, local - (ends[group - 1] if group else 0)

    def _ends(self, shard: int) -> list[int]:
        if shard not in self._group_ends:
            meta = self._file(shard).metadata
            self._group_ends[shard] = list(
                itertools.accumulate(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
            )
        return self._group_ends[shard]

    def _file(self, shard: int) -> Any:
        return self.pool.file((self._key, shard), lambda: self.cache.open_shard_file(shard))

    def _block(self, shard: int, group: int) -> RowBlock:
        return self.pool.group((self._key, shard, group), lambda: self.cache.decode_row_group(self._file(shard), shard, group))


_KEYS = itertools.count()

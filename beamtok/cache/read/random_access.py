"""Random access to a packed cache's rows by global row number, for the global shuffle.

Global row ``g`` is row ``g - start[s]`` of shard ``s`` (shards in order, row counts from the
manifest). Rows are served a batch at a time: each row group the batch needs is decoded once
and kept in an LRU cache of decoded groups bounded in bytes (and of open files), so a
permutation that revisits row groups reads each from disk once while they fit the budget; a
cache smaller than the budget is decoded once per reader. Small row groups (``beamtok cache
--row-group-rows``) keep the cost of a random row low when the cache does not fit.
"""

from __future__ import annotations

import bisect
import itertools
from collections import OrderedDict
from typing import Any

import numpy as np

from beamtok.cache.read.reader import Cache
from beamtok.shards.rows import RowBlock, gather_rows

__all__ = ["RowAccess"]

OPEN_FILES = 16
DECODE_BUDGET = 256 << 20  # bytes of decoded rows kept per reader
ROW_OVERHEAD = 400  # bytes of Python objects per decoded row, beside its arrays


class RowAccess:
    """Rows of a packed cache by global row number, through a bounded decode cache."""

    def __init__(self, cache: Cache, max_bytes: int | None = None) -> None:
        self.cache = cache
        self.max_bytes = DECODE_BUDGET if max_bytes is None else max_bytes
        self._held = 0
        rows = [int(n) for n in cache.manifest.column("rows")]
        self.starts = [0, *itertools.accumulate(rows)]
        self.total = self.starts[-1]
        self._group_ends: dict[int, list[int]] = {}
        self._files: OrderedDict[int, Any] = OrderedDict()
        self._groups: OrderedDict[tuple[int, int], tuple[RowBlock, int]] = OrderedDict()
        self.groups_decoded = 0

    def block(self, global_rows: np.ndarray) -> RowBlock:
        """These rows, in the order given, as one block."""
        located = [self._locate(int(g)) for g in global_rows]
        needed = sorted(set((shard, group) for shard, group, _ in located))
        blocks = {key: self._block(*key) for key in needed}
        return gather_rows([(blocks[(s, g)], i) for s, g, i in located])

    def close(self) -> None:
        for pf in self._files.values():
            pf.close()
        self._files.clear()
        self._groups.clear()
        self._held = 0

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
        if shard in self._files:
            self._files.move_to_end(shard)
            return self._files[shard]
        pf = self.cache.open_shard_file(shard)
        self._files[shard] = pf
        if len(self._files) > OPEN_FILES:
            self._files.popitem(last=False)[1].close()
        return pf

    def _block(self, shard: int, group: int) -> RowBlock:
        key = (shard, group)
        if key in self._groups:
            self._groups.move_to_end(key)
            return self._groups[key][0]
        block = self.cache.decode_row_group(self._file(shard), shard, group)
        self.groups_decoded += 1
        size = _decoded_bytes(block)
        self._groups[key] = (block, size)
        self._held += size
        while self._held > self.max_bytes and len(self._groups) > 1:
            self._held -= self._groups.popitem(last=False)[1][1]
        return block


def _decoded_bytes(block: RowBlock) -> int:
    return block.nbytes() + ROW_OVERHEAD * len(block)

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

import functools
import itertools
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from beamtok._src.cache.read.reader import Cache
from beamtok._src.production.decode_pool import DEFAULT_DECODE_BUDGET, OPEN_FILES, ROW_OVERHEAD, DecodePool
from beamtok._src.shards.rows import RowBlock, gather_from

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
        self.shard_rows = tuple(int(n) for n in cache.manifest.column("rows"))
        self._starts = np.concatenate([[0], np.cumsum(self.shard_rows, dtype=np.int64)])
        self.total = int(self._starts[-1])
        self._group_ends: dict[int, np.ndarray] = {}
        self._helper_files: dict[int, OrderedDict[int, Any]] = {}  # per helper thread: its open shard files
        self._helper_lock = threading.Lock()

    @property
    def groups_decoded(self) -> int:
        return self.pool.groups_decoded

    def block(self, global_rows: np.ndarray) -> RowBlock:
        """These rows, in the order given, as one block."""
        blocks: list[RowBlock] = []
        rows = np.asarray(global_rows, dtype=np.int64)
        which = np.empty(len(rows), dtype=np.int64)
        in_group = np.empty(len(rows), dtype=np.int64)
        for shard, group, chosen, local in self._groups_of(rows):
            which[chosen] = len(blocks)
            in_group[chosen] = local
            blocks.append(self._block(shard, group))
        return gather_from(blocks, which, in_group)

    def decode_ahead(self, global_rows: np.ndarray, keep: int) -> None:
        """Start decoding the row groups of these rows on a helper thread, as far as the decode
        budget has room beside the ``keep`` groups read last (see :meth:`DecodePool.decode_ahead`)."""
        for shard, group, _, _ in self._groups_of(
            np.asarray(global_rows, dtype=np.int64)
        ):  # footers read here, not on the helper
            self.pool.decode_ahead(
                (self._key, shard, group), functools.partial(self._decode_on_helper, shard, group), keep
            )

    def _groups_of(self, rows: np.ndarray) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
        """(shard, row group, which of ``rows`` lie in it, their rows within it) per group."""
        shards = np.searchsorted(self._starts, rows, side="right") - 1
        local = rows - self._starts[shards]
        out = []
        for shard in np.unique(shards).tolist():
            chosen = np.flatnonzero(shards == shard)
            ends = self._ends(shard)
            groups = np.searchsorted(ends, local[chosen], side="right")
            group_starts = np.concatenate([[0], ends])[groups]
            for group in np.unique(groups).tolist():
                mine = groups == group
                out.append((shard, group, chosen[mine], local[chosen[mine]] - group_starts[mine]))
        return out

    def close(self) -> None:
        self.pool.finish_ahead(lambda key: key[0] == self._key)  # nothing of ours runs after this
        with self._helper_lock:
            for files in self._helper_files.values():
                for parquet_file in files.values():
                    parquet_file.close()
            self._helper_files.clear()
        if self._owns_pool:
            self.pool.close()

    def _decode_on_helper(self, shard: int, group: int) -> RowBlock:
        """Row group ``group`` of ``shard``, decoded on a helper thread through that thread's
        own open files (the pool's are the reader's; a file is never read by two threads)."""
        with self._helper_lock:
            files = self._helper_files.setdefault(threading.get_ident(), OrderedDict())
            parquet_file = files.pop(shard, None)
        if parquet_file is None:
            parquet_file = self.cache.open_shard_file(shard)
        with self._helper_lock:
            files[shard] = parquet_file
            while len(files) > OPEN_FILES:
                files.popitem(last=False)[1].close()
        return self.cache.decode_row_group(parquet_file, shard, group)

    def _ends(self, shard: int) -> np.ndarray:
        """The row after each row group of ``shard``, counted from the shard's first row."""
        if shard not in self._group_ends:
            meta = self._file(shard).metadata
            self._group_ends[shard] = np.cumsum(
                [meta.row_group(i).num_rows for i in range(meta.num_row_groups)], dtype=np.int64
            )
        return self._group_ends[shard]

    def _file(self, shard: int) -> Any:
        return self.pool.file((self._key, shard), lambda: self.cache.open_shard_file(shard))

    def _block(self, shard: int, group: int) -> RowBlock:
        return self.pool.group(
            (self._key, shard, group), lambda: self.cache.decode_row_group(self._file(shard), shard, group)
        )


_KEYS = itertools.count()

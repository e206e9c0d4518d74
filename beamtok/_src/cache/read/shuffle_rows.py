"""A packed cache's rows for the global shuffle: decoded from row groups in memory while the
cache fits a reader's decode budget, else read from a local memory-mapped copy.

Chosen at the first fetch, not when the dataset is made, so nothing is read or copied before
the first ``next()``. Both give the same rows; the choice is I/O only (no fingerprint or
state depends on it).
"""

from __future__ import annotations

import numpy as np

from beamtok._src.cache.format.schema import TOKEN_DTYPES
from beamtok._src.cache.read import random_access
from beamtok._src.cache.read.local_rows import local_rows
from beamtok._src.cache.read.random_access import RowAccess
from beamtok._src.cache.read.reader import Cache
from beamtok._src.production.protocol import RowSource
from beamtok._src.shards.rows import RowBlock

__all__ = ["ShuffleRows", "decoded_bytes"]


def decoded_bytes(cache: Cache) -> int:
    """What every row of ``cache`` takes decoded in memory (token columns and row objects)."""
    totals = cache.manifest.totals
    per_token = sum(dtype.itemsize for dtype in TOKEN_DTYPES.values())
    return (totals["tokens"] + totals["pad_tokens"]) * per_token + totals["rows"] * random_access.ROW_OVERHEAD


class ShuffleRows:
    """Rows of ``cache`` by global row number. ``local_copy``: True (a copy in the default
    directory), a directory, False (always decode row groups), or None (a copy only when the
    decoded cache exceeds the decode budget)."""

    def __init__(self, cache: Cache, local_copy: bool | str | None = None) -> None:
        self.cache = cache
        self.local_copy = local_copy
        self.shard_rows = tuple(int(n) for n in cache.manifest.column("rows"))
        self.total = sum(self.shard_rows)
        self._rows: RowSource | None = None

    @property
    def reads_local_copy(self) -> bool | None:
        """Whether rows come from a local copy (None before the first fetch)."""
        return None if self._rows is None else not isinstance(self._rows, RowAccess)

    def opened(self) -> RowSource:
        """The row source chosen (choosing now if not yet)."""
        if self._rows is None:
            self._rows = self._open()
        return self._rows

    def block(self, global_rows: np.ndarray) -> RowBlock:
        return self.opened().block(global_rows)

    def decode_ahead(self, global_rows: np.ndarray, keep: int) -> None:
        self.opened().decode_ahead(global_rows, keep)

    def _open(self) -> RowSource:
        choice = self.local_copy
        if choice is None:
            choice = decoded_bytes(self.cache) > random_access.DECODE_BUDGET
        if choice is False:
            return RowAccess(self.cache)
        return local_rows(self.cache, choice if isinstance(choice, str) else None)

    def close(self) -> None:
        if self._rows is not None:
            self._rows.close()

"""The units of the spread global shuffle, cut within shards.

Each shard's rows are cut, in order, into units of ``unit`` rows (one row group each when the
build wrote groups of ``unit`` rows); a shard whose row count is not a multiple of ``unit``
ends in a short unit. Units are numbered across shards in cache order, and unit ``j`` owns the
numbers ``j * unit .. j * unit + unit - 1``: the numbers a short unit has no row for are
holes. A unit therefore never straddles two row groups (numbered straight through the cache,
every unit after a shard's odd end would), so a reader holding K units decoded holds at most
K row groups; the price is the holes, at most ``unit - 1`` a shard, which the shuffle passes
over. Everything is computed from the shards' row counts (O(shards)); nothing per row is
stored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ShardUnits"]


class ShardUnits:
    """The units of ``unit`` rows cut from shards of ``shard_rows`` rows each."""

    def __init__(self, shard_rows: Sequence[int], unit: int) -> None:
        rows = np.asarray(shard_rows, dtype=np.int64)
        if len(rows) == 0 or (rows < 0).any() or unit < 1:
            raise ValueError("ShardUnits needs the row counts of one or more shards and a unit of at least one row")
        self.unit = unit
        self.shard_rows = rows
        self.total = int(rows.sum())  # rows
        self.starts = np.concatenate([[0], np.cumsum(rows)[:-1]])  # each shard's first cache row
        self.per_shard = -(-rows // unit)
        self.ends = np.cumsum(self.per_shard)  # units of shards 0..s
        self.units = int(self.ends[-1])
        self.positions = self.units * unit  # numbers, holes included
        short = rows % unit != 0
        self.short_units = self.ends[short] - 1  # the last unit of each shard that ends short
        self.short_lengths = rows[short] % unit  # its rows

    @property
    def has_holes(self) -> bool:
        return len(self.short_units) > 0

    def rows_of(self, numbers: np.ndarray) -> np.ndarray:
        """The cache row of each number, or -1 for a hole."""
        numbers = np.asarray(numbers, dtype=np.int64)
        units = numbers // self.unit
        shard = np.searchsorted(self.ends, units, side="right")
        local = (units - (self.ends[shard] - self.per_shard[shard])) * self.unit + numbers % self.unit
        return np.where(local < self.shard_rows[shard], self.starts[shard] + local, -1)

    def unit_lengths(self, units: np.ndarray) -> np.ndarray:
        """The rows of each of these units."""
        units = np.asarray(units, dtype=np.int64)
        shard = np.searchsorted(self.ends, units, side="right")
        first = self.ends[shard] - self.per_shard[shard]
        return np.minimum(self.unit, self.shard_rows[shard] - (units - first) * self.unit)

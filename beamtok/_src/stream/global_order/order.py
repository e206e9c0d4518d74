"""The order of one epoch of a global shuffle: position ``p`` -> global row, computed, never
stored (see :mod:`beamtok._src.stream.global_order.shuffle_source` for the orders and how readers take them).

A whole-cache order is a Feistel permutation keyed by ``(seed, epoch)``; a windowed one
permutes windows of consecutive rows, then the rows inside each; a spread one takes K units
cut within shards (:class:`~beamtok._src.stream.global_order.shard_units.ShardUnits`) one after another, and
its short units leave holes: :class:`EpochHoles` finds them from the shards' row counts.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from beamtok._src.base.validate import check_int as check_option
from beamtok._src.base.validate import check_optional_int
from beamtok._src.stream.global_order.permutation import FeistelPermutation
from beamtok._src.stream.global_order.shard_units import ShardUnits

__all__ = ["EpochHoles", "GlobalOrder"]


@dataclass(frozen=True)
class GlobalOrder:
    """The permutation of one epoch over ``total`` rows (with ``spread``, over the positions of
    ``units``, holes included: see :class:`~beamtok._src.stream.global_order.shard_units.ShardUnits`)."""

    total: int
    seed: int
    epoch: int
    window: int | None = None
    spread: int | None = None  # units per window
    units: ShardUnits | None = None  # with spread: the units, cut within shards

    def __post_init__(self) -> None:
        check_option(self.seed, "seed")
        check_optional_int(self.window, "window", minimum=1)
        check_optional_int(self.spread, "spread", minimum=1)
        if self.spread is not None and self.units is None:
            raise ValueError("a spread order needs its units")

    @property
    def positions(self) -> int:
        """Positions in the epoch: its rows, and with spread the holes of short units too."""
        return self.units.positions if self.spread is not None and self.units is not None else self.total

    @property
    def has_holes(self) -> bool:
        return self.spread is not None and self.units is not None and self.units.has_holes

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """The global rows at these positions of the epoch (-1 at a hole)."""
        if self.spread is not None:
            return self._spread_rows(np.asarray(positions, dtype=np.int64))
        if self.window is None or self.window >= self.total:
            return FeistelPermutation(self.total, (self.seed, self.epoch))(positions)
        size = self.window
        windows = math.ceil(self.total / size)
        last = self.total - (windows - 1) * size  # the last window may be shorter
        order = FeistelPermutation(windows, (self.seed, self.epoch))(np.arange(windows))
        sizes = np.where(order == windows - 1, last, size)
        ends = np.cumsum(sizes)
        slots = np.searchsorted(ends, positions, side="right")
        out = np.empty(len(positions), dtype=np.int64)
        for slot in np.unique(slots):
            chosen = slots == slot
            w = int(order[slot])
            offsets = positions[chosen] - (ends[slot] - sizes[slot])
            inner = FeistelPermutation(int(sizes[slot]), (self.seed, self.epoch, w))(offsets)
            out[chosen] = w * size + inner
        return out

    def _spread_rows(self, positions: np.ndarray) -> np.ndarray:
        units, spread = self.units, self.spread
        assert units is not None and spread is not None
        size = units.unit
        window = positions // (spread * size)
        in_window = np.minimum(spread, units.units - window * spread)  # the last window may hold fewer units
        offset = positions - window * spread * size
        slot, row = offset % in_window, offset // in_window
        unit = FeistelPermutation(units.units, (self.seed, self.epoch, 1))(window * spread + slot)
        length = units.unit_lengths(unit)
        out = np.full(len(positions), -1, dtype=np.int64)
        present = np.flatnonzero(row < length)  # the rest are holes of short units
        key = _spread_key(unit[present], self.seed, self.epoch)
        inner = np.empty(len(present), dtype=np.int64)
        for n in np.unique(
            length[present]
        ).tolist():  # one permutation per unit length: each unit its own rotation of it
            same = length[present] == n
            shifted = (row[present][same] + key[same] % n) % n
            inner[same] = FeistelPermutation(n, (self.seed, self.epoch, 2))(shifted)
        out[present] = units.rows_of(unit[present] * size + inner)
        return out

    def positions_of(self, rows: np.ndarray) -> np.ndarray:
        """The positions of the epoch's rows number ``rows`` (counting rows, holes passed over)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not self.has_holes:
            return rows
        holes = self._holes
        assert self.spread is not None and self.units is not None
        span = self.spread * self.units.unit
        i = np.searchsorted(holes.rows_before, rows, side="right") - 1
        out = rows.copy()
        after = i >= 0
        ii = i[after]
        inside = rows[after] - holes.rows_before[ii] < holes.window_rows[ii]
        out[np.flatnonzero(after)[~inside]] = (
            rows[after][~inside] + holes.before[ii[~inside]] + holes.count[ii[~inside]]
        )
        for k in np.flatnonzero(after)[inside].tolist():
            w = int(i[k])
            out[k] = int(holes.windows[w]) * span + holes.select(w, int(rows[k] - holes.rows_before[w]))
        return out

    def rows_per_reader(self, parts: int) -> np.ndarray:
        """The rows each of ``parts`` readers takes in the epoch (reader ``r``: positions
        ``r, r + parts, ...``, holes not counted)."""
        per = np.full(parts, self.positions // parts, dtype=np.int64)
        per[: self.positions % parts] += 1
        if self.has_holes:
            per -= self._holes.owned(parts)
        return per

    @functools.cached_property
    def _holes(self) -> EpochHoles:
        assert self.spread is not None and self.units is not None
        return EpochHoles(self.units, self.spread, FeistelPermutation(self.units.units, (self.seed, self.epoch, 1)))


def _spread_key(units: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """A well-spread number per unit, so units of one epoch take their rows in different orders."""
    key = FeistelPermutation(1 << 62, (seed, epoch, 4))
    return key(units.astype(np.int64))


class EpochHoles:
    """Where one epoch's holes lie: the short units' windows and slots, found by inverting the
    permutation of units (O(shards)), and the rows before each window that holds one."""

    def __init__(self, units: ShardUnits, spread: int, order: FeistelPermutation) -> None:
        self.units, self.spread = units, spread
        at = order.inverse(units.short_units)
        window, slot, length = at // spread, at % spread, units.short_lengths
        by_window = np.argsort(window, kind="stable")
        window, slot, length = window[by_window], slot[by_window], length[by_window]
        self.windows, first = np.unique(window, return_index=True)
        holes = units.unit - length
        self.count = (
            np.add.reduceat(holes, first) if len(first) else np.zeros(0, dtype=np.int64)
        )  # holes in each such window
        self.before = np.concatenate([[0], np.cumsum(self.count)[:-1]]).astype(
            np.int64
        )  # holes in the windows before it
        span = spread * units.unit
        self.rows_before = self.windows * span - self.before
        self.held = np.minimum(spread, units.units - self.windows * spread)  # units in each such window
        self.window_rows = self.held * units.unit - self.count
        self.short = [(slot[a:b], length[a:b]) for a, b in zip(first, [*first[1:], len(window)])]
        self._window, self._slot, self._length = window, slot, length

    def select(self, w: int, m: int) -> int:
        """The offset, in the ``w``-th window with holes, of its ``m``-th row: the row level
        ``r`` by bisection on the rows before it, then the slot among those still holding rows."""
        slots, lengths = self.short[w]
        held = int(self.held[w])

        def before(r: int) -> int:
            return r * held - int(np.maximum(0, r - lengths).sum())

        lo, hi = 0, self.units.unit - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if before(mid) <= m:
                lo = mid
            else:
                hi = mid - 1
        slot = m - before(lo)
        for s in sorted(slots[lengths <= lo].tolist()):  # the slots out of rows by level lo
            if s <= slot:
                slot += 1
        return lo * held + slot

    def owned(self, parts: int) -> np.ndarray:
        """Holes per reader of ``parts`` (reader ``r`` takes positions ``= r`` mod ``parts``)."""
        out = np.zeros(parts, dtype=np.int64)
        size, span = self.units.unit, self.spread * self.units.unit
        held = np.minimum(self.spread, self.units.units - self._window * self.spread)
        for lo in range(0, len(self._window), 4096):  # a bounded batch of short units at a time
            window, slot, length, n = (a[lo : lo + 4096] for a in (self._window, self._slot, self._length, held))
            count = size - length
            first = window * span + length * n + slot  # the first hole of each: row level = its length
            step = np.repeat(n, count)
            level = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
            out += np.bincount((np.repeat(first, count) + level * step) % parts, minlength=parts)
        return out

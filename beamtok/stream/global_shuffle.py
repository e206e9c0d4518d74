"""global_shuffle(seed, window): every row of a cache once per epoch, in a keyed permutation.

Position ``p`` of epoch ``e`` is global row ``perm_e(p)``, where ``perm_e`` is a Feistel
permutation keyed by ``(seed, e)`` over all rows (``window=None``), or a permutation of
windows of ``window`` consecutive rows followed by a permutation inside each window (keyed by
``(seed, e, window)``): with windows, the rows read close together in time come from a few
row groups, so a small decode cache serves them; without, any row may follow any other.

With ``spread=K`` (and units of ``unit`` consecutive rows, a row group's worth), a window is
instead K units drawn anywhere in the cache by a permutation of all units keyed by
``(seed, e)``, and its rows are taken one unit after another: position ``o`` of a window is
row ``o div K`` (permuted inside the unit) of its unit in slot ``o mod K``. Every unit is read
whole within its window, so a reader holding K units decoded decodes each row group about
once an epoch, while consecutive rows never come from the same unit. With K a multiple of the
number of readers, reader ``part`` takes only the slots ``part mod parts`` and so decodes only
its own K/parts units. Rows past the last whole unit (fewer than ``unit``) come last in the
epoch, permuted.

The permutation is computed, never stored. Readers split the positions, not the shards:
reader ``part`` of ``parts`` takes positions ``part, part + parts, ...``, so the global order
is the same for any number of readers. The state is ``{epoch, position, stats}``: the next
position of the epoch to consider, whatever the corpus size. After a resume on another
number of readers it also lists ``taken``: positions (numbered ``epoch * rows + position``)
faster old readers had taken beyond the slowest one's, which are skipped. Rows are fetched in
batches of the next positions, each row group decoded once per batch at most.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok.backends.protocol import RowSource
from beamtok.backends.spans import RowSpan, Taken
from beamtok.base.errors import ConfigError, StateError
from beamtok.base.validate import check_int as check_option
from beamtok.base.validate import check_optional_int
from beamtok.shards.processor import Produced, ShardCursor
from beamtok.shards.rows import RowBlock
from beamtok.stream.node import RootSource
from beamtok.stream.permutation import FeistelPermutation
from beamtok.stream.reader_split import ReaderSplit
from beamtok.stream.state import check_int, check_keys, copy_state
from beamtok.stream.stats import StreamStats, describe_stats, summed_stats

__all__ = ["GlobalOrder", "GlobalShuffleSource"]

FETCH = 256  # positions fetched together


@dataclass(frozen=True)
class GlobalOrder:
    """The permutation of one epoch over ``total`` rows."""

    total: int
    seed: int
    epoch: int
    window: int | None = None
    spread: int | None = None  # units per window
    unit: int | None = None  # rows per unit (with spread)

    def __post_init__(self) -> None:
        check_option(self.seed, "seed")
        check_optional_int(self.window, "window", minimum=1)
        check_optional_int(self.spread, "spread", minimum=1)
        check_optional_int(self.unit, "unit_rows", minimum=1)

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """The global rows at these positions of the epoch."""
        if self.spread is not None and self.unit is not None:
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
        assert self.spread is not None and self.unit is not None
        size, units = self.unit, self.total // self.unit
        whole = units * size  # rows in whole units; the rest come last
        out = np.empty(len(positions), dtype=np.int64)
        tail = positions >= whole
        if tail.any():
            out[tail] = whole + FeistelPermutation(self.total - whole, (self.seed, self.epoch, 3))(positions[tail] - whole)
        inner = ~tail
        if inner.any():
            p = positions[inner]
            window = p // (self.spread * size)
            in_window = np.minimum(self.spread, units - window * self.spread)  # the last window may hold fewer units
            offset = p - window * self.spread * size
            slot, row = offset % in_window, offset // in_window
            unit = FeistelPermutation(units, (self.seed, self.epoch, 1))(window * self.spread + slot)
            shifted = (row + (_spread_key(unit, self.seed, self.epoch) % size)) % size  # each unit its own order
            out[inner] = unit * size + FeistelPermutation(size, (self.seed, self.epoch, 2))(shifted)
        return out


def _spread_key(units: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """A well-spread number per unit, so units of one epoch take their rows in different orders."""
    key = FeistelPermutation(1 << 62, (seed, epoch, 4))
    return key(units.astype(np.int64))


class GlobalShuffleSource(RootSource):
    """Yields a packed cache's rows in a keyed permutation, epoch after epoch."""

    KEYS = ("epoch", "position", "stats")

    def __init__(
        self, rows: RowSource, *, seed: int, window: int | None, epochs: int | None, split: ReaderSplit, spread: tuple[int, int] | None = None
    ) -> None:
        if rows.total == 0:
            raise ConfigError("global_shuffle(): the cache holds no rows")
        self.source = rows
        self.total = rows.total
        self.seed = seed
        self.window = window
        self.spread = spread  # (units per window, rows per unit)
        self.epochs = epochs
        self.part, self.parts = split.part, split.parts
        self.reset(None)

    @classmethod
    def describe_state(cls, state: Any, indent: str = "") -> list[str]:
        """A saved global-shuffle state in words."""
        if not isinstance(state, dict) or "position" not in state:
            return [f"{indent}global shuffle: unreadable ({state!r})"]
        taken = state.get("taken") or []
        extra = f"; {len(taken)} later position(s) taken by readers of another world size are skipped" if taken else ""
        return [
            f"{indent}global shuffle: epoch {state.get('epoch')}, position {state.get('position')} of the epoch's permutation; "
            f"handed out so far: {describe_stats(state.get('stats'))}{extra}"
        ]

    def reset(self, state: dict[str, Any] | None) -> None:
        self.stats = StreamStats()
        self._epoch = 0
        self._position = 0  # the next position of this epoch to consider
        self._taken: list[int] = []  # linear numbers (epoch * total + position) to skip
        self._block: RowBlock | None = None  # the rows of the positions fetched last
        self._positions = np.zeros(0, dtype=np.int64)
        self._next = 0
        if state is None:
            return
        state = copy_state(state)
        state = check_keys(state, (*self.KEYS, "taken") if isinstance(state, dict) and "taken" in state else self.KEYS, "global shuffle")
        self._epoch = check_int(state["epoch"], "epoch", "global shuffle")
        if self.epochs is not None and self._epoch >= self.epochs:
            raise StateError(f"global shuffle: epoch {self._epoch} is past the last epoch ({self.epochs})")
        self._position = check_int(state["position"], "position", "global shuffle")
        if self._position > self.total:
            raise StateError(f"global shuffle: position {self._position} is past the cache's {self.total} rows")
        taken = state.get("taken", [])
        if not isinstance(taken, list):
            raise StateError("global shuffle: taken must be a list of positions")
        self._taken = sorted(check_int(i, "taken", "global shuffle") for i in taken)
        self.stats = StreamStats.from_json(state["stats"])

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"epoch": self._epoch, "position": self._position, "stats": self.stats.to_json()}
        here = self._epoch * self.total + self._position
        taken = [i for i in self._taken if i >= here]
        if taken:
            state["taken"] = taken
        return state

    @property
    def epoch(self) -> int:
        return self._epoch

    def stats_json(self) -> dict[str, Any]:
        return {**self.stats.to_json(), "epoch": self._epoch}

    def __iter__(self) -> GlobalShuffleSource:
        return self

    def __next__(self) -> dict[str, Any]:
        while self._next >= len(self._positions):
            if not self._fetch_or_advance():
                raise StopIteration
        assert self._block is not None
        i = self._next
        example = self._block.examples[i]
        self._next = i + 1
        self._position = int(self._positions[i]) + 1
        self.stats.record(Produced(example, ShardCursor(), self._block.counts[i]))
        return example

    def next_rows(self, limit: int) -> list[Taken] | None:
        """The next ``limit`` rows (fewer at the end) as pieces of fetched blocks, for
        ``batch()`` to stack without a dict per example; what ``limit`` calls of ``next()``
        would return, with the same state after them."""
        pieces: list[Taken] = []
        need = limit
        while need > 0:
            if self._next >= len(self._positions):
                if not self._fetch_or_advance():
                    break
                continue
            block = self._block
            assert block is not None
            if not block.columns:  # rows held as examples: one at a time
                return None if not pieces else pieces
            lo = self._next
            hi = min(len(self._positions), lo + need)
            taken = Taken(block, lo, hi, ShardCursor(), RowSpan(block).counts_of(lo, hi))
            self._next = hi
            self._position = int(self._positions[hi - 1]) + 1
            self.stats.record_taken(taken)
            pieces.append(taken)
            need -= hi - lo
        return pieces

    def _fetch_or_advance(self) -> bool:
        """Fetch the next positions, moving to the next epoch at this one's end; False after the last epoch."""
        while not self._fetch():
            if self.epochs is not None and self._epoch + 1 >= self.epochs:
                return False
            self._epoch += 1
            self._position = 0
        return True

    def _fetch(self) -> bool:
        """Read the rows of this reader's next FETCH positions of the epoch; False at its end."""
        first = _first_owned(self._position, self.part, self.parts)
        base = self._epoch * self.total
        skip = {i - base for i in self._taken if base + first <= i < base + self.total}
        positions = np.arange(first, self.total, self.parts, dtype=np.int64)[: FETCH + len(skip)]
        if skip:
            positions = positions[~np.isin(positions, np.fromiter(skip, dtype=np.int64))]
        positions = positions[:FETCH]
        self._next = 0
        if not len(positions):
            self._block, self._positions = None, positions
            return False
        order = self.order(self._epoch)
        self._block = self.source.block(order.rows_at(positions))
        self._positions = positions
        return True

    def finished(self) -> bool:
        """Whether the last epoch has been read to its end (never, without a last epoch)."""
        if self.epochs is None or self._epoch + 1 < self.epochs or self._next < len(self._positions):
            return False
        here = self._epoch * self.total + self._position
        first = _first_owned(self._position, self.part, self.parts)
        return first >= self.total and not any(i >= here for i in self._taken)

    def order(self, epoch: int) -> GlobalOrder:
        """The permutation of ``epoch``."""
        spread, unit = self.spread if self.spread is not None else (None, None)
        return GlobalOrder(self.total, self.seed, epoch, self.window, spread, unit)

    def close(self) -> None:
        self.source.close()

    def merge(self, states: list[dict[str, Any]], olds: list[ReaderSplit], new: ReaderSplit) -> dict[str, Any]:
        """Reader ``new``'s state from every old reader's: from the first position no old
        reader has taken, skipping the ones faster readers took beyond it. Positions are
        numbered ``epoch * rows + position`` across epochs."""
        total, parts = self.total, olds[0].parts
        probes = []
        for state, old in zip(states, olds):
            probe = GlobalShuffleSource(self.source, seed=self.seed, window=self.window, epochs=self.epochs, split=old, spread=self.spread)
            probe.reset(state)
            probes.append(probe)
        taken_before = {i for probe in probes for i in probe._taken}

        def next_owned(linear: int, part: int) -> int:
            while True:
                epoch, position = divmod(linear, total)
                position = _first_owned(position, part, parts)
                linear = epoch * total + position if position < total else (epoch + 1) * total + part
                if part >= total or linear not in taken_before:
                    return linear
                linear += 1

        nexts = [next_owned(p._epoch * total + p._position, old.part) for p, old in zip(probes, olds)]
        start = min(nexts)
        taken = {i for i in taken_before if i >= start}
        for end, old in zip(nexts, olds):
            if old.part >= total:  # more readers than rows: this one owns none
                continue
            linear = next_owned(start, old.part)
            while linear < end:
                taken.add(linear)
                linear = next_owned(linear + 1, old.part)
        epoch, position = divmod(start, total)
        merged: dict[str, Any] = {"epoch": epoch, "position": position, "stats": summed_stats([s["stats"] for s in states], new.part)}
        if self.epochs is not None and epoch >= self.epochs:
            merged = {"epoch": self.epochs - 1, "position": total, "stats": merged["stats"]}
        if taken:
            merged["taken"] = sorted(taken)
        return merged

    def state_at(self, example: int) -> dict[str, Any]:
        raise ConfigError("start_example does not apply to a global shuffle; resume from a state_dict")

    def can_seek(self) -> bool:
        """Whether :meth:`seek` can move without reading: always, but right after a resume on
        another world size (positions faster old readers took are skipped one by one)."""
        here = self._epoch * self.total + self._position
        return not any(i >= here for i in self._taken)

    def seek(self, rows: int) -> int:
        """Move past this reader's next ``rows`` rows without reading them, to the very state
        reading them would leave (but the counts, which only count rows handed out); returns
        how many were passed (fewer at the end of the last epoch)."""
        passed = 0
        if self._next < len(self._positions):  # rows fetched but not handed out yet
            here = min(rows, len(self._positions) - self._next)
            self._position = int(self._positions[self._next + here - 1]) + 1
            self._next += here
            passed = here
        self._block, self._positions, self._next = None, np.zeros(0, dtype=np.int64), 0
        while passed < rows:
            first = _first_owned(self._position, self.part, self.parts)
            left_in_epoch = max(0, -(-(self.total - first) // self.parts))
            if rows - passed <= left_in_epoch:
                self._position = first + (rows - passed - 1) * self.parts + 1
                return rows
            passed += left_in_epoch
            if left_in_epoch:
                self._position = first + (left_in_epoch - 1) * self.parts + 1
            if self.epochs is not None and self._epoch + 1 >= self.epochs:
                return passed
            if self.part >= self.total:  # more readers than rows: this one owns none, ever
                return passed
            self._epoch += 1
            self._position = 0
        return passed


def _first_owned(position: int, part: int, parts: int) -> int:
    """The first position at or after ``position`` that reader ``part`` of ``parts`` takes."""
    return position + (part - position) % parts

"""global_shuffle(seed, window): every row of a cache once per epoch, in a keyed permutation.

Position ``p`` of epoch ``e`` is global row ``perm_e(p)``, where ``perm_e`` is a Feistel
permutation keyed by ``(seed, e)`` over all rows (``window=None``), or a permutation of
windows of ``window`` consecutive rows followed by a permutation inside each window (keyed by
``(seed, e, window)``): with windows, the rows read close together in time come from a few
row groups, so a small decode cache serves them; without, any row may follow any other.

With ``spread=K``, the rows are cut into units of ``unit`` rows within each shard (one row
group each; :class:`~beamtok._src.stream.global_order.shard_units.ShardUnits`), and a window is K units drawn
anywhere in the cache by a permutation of all units keyed by ``(seed, e)``; its rows are taken
one unit after another: position ``o`` of a window is row ``o div K`` (permuted inside the
unit) of its unit in slot ``o mod K``. Every unit is read whole within its window, so a
reader holding K row groups decoded decodes each about once an epoch, while consecutive rows
never come from the same unit. With K a multiple of the number of readers, reader ``part``
takes only the slots ``part mod parts`` and so decodes only its own K/parts units. A shard's
last unit may be short: its missing rows are holes, positions that yield nothing, which their
reader passes over (so readers' row counts may differ by up to the holes they own).

The permutation is computed, never stored. Readers split the positions, not the shards:
reader ``part`` of ``parts`` takes positions ``part, part + parts, ...``, so the global order
is the same for any number of readers. The state is ``{epoch, position, stats}``: the next
position of the epoch to consider, whatever the corpus size. After a resume on another
number of readers it also lists ``taken``: positions (numbered ``epoch * positions + position``)
faster old readers had taken beyond the slowest one's, which are skipped. Rows are fetched in
batches of the next positions, each row group decoded once per batch at most.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.validate import check_int
from beamtok._src.production.protocol import RowSource
from beamtok._src.shards.items import Produced, ShardCursor
from beamtok._src.shards.rows import RowBlock
from beamtok._src.shards.spans import RowSpan, Taken
from beamtok._src.stream.global_order.order import GlobalOrder
from beamtok._src.stream.global_order.shard_units import ShardUnits
from beamtok._src.stream.node import RootSource
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.reading.stats import StreamStats, describe_stats, summed_stats
from beamtok._src.stream.state import GlobalShuffleState, check_keys, copy_state

__all__ = ["GlobalShuffleSource"]

FETCH = 256  # positions fetched together


class GlobalShuffleSource(RootSource[GlobalShuffleState]):
    """Yields a packed cache's rows in a keyed permutation, epoch after epoch."""

    def __init__(
        self,
        rows: RowSource,
        *,
        seed: int,
        window: int | None,
        epochs: int | None,
        split: ReaderSplit,
        spread: tuple[int, int] | None = None,
        units: ShardUnits | None = None,
    ) -> None:
        if rows.total == 0:
            raise ConfigError("global_shuffle(): the cache holds no rows")
        self.source = rows
        self.total = rows.total
        self.seed = seed
        self.window = window
        self.spread = spread  # (units per window, rows per unit)
        if spread is not None and units is None:
            units = ShardUnits(rows.shard_rows, spread[1])
        self.units = units  # with spread (made once: a merge's probes share it)
        self.positions = (
            units.positions if spread is not None and units is not None else self.total
        )  # an epoch's, holes included
        self.epochs = epochs
        self.part, self.parts = split.part, split.parts
        self.reset(None)

    @classmethod
    def state_lines(cls, state: Any, indent: str = "") -> list[str]:
        """A saved global-shuffle state in words."""
        if not isinstance(state, dict) or "position" not in state:
            return [f"{indent}global shuffle: unreadable ({state!r})"]
        taken = state.get("taken") or []
        extra = f"; {len(taken)} later position(s) taken by readers of another world size are skipped" if taken else ""
        return [
            f"{indent}global shuffle: epoch {state.get('epoch')}, position {state.get('position')} of the epoch's permutation; "
            f"handed out so far: {describe_stats(state.get('stats'))}{extra}"
        ]

    def reset(self, state: GlobalShuffleState | None) -> None:
        self.stats = StreamStats()
        self._epoch = 0
        self._position = 0  # the next position of this epoch to consider
        self._taken: list[int] = []  # linear numbers (epoch * positions + position) to skip
        self._block: RowBlock | None = None  # the rows of the positions fetched last
        self._positions = np.zeros(0, dtype=np.int64)
        self._next = 0
        self._ahead_window = -1  # the spread window whose row groups were last asked ahead for
        if state is None:
            return
        copied = copy_state(state)
        saved = check_keys(copied, GlobalShuffleState, "global shuffle")
        self._epoch = check_int(saved["epoch"], "epoch", "global shuffle")
        if self.epochs is not None and self._epoch >= self.epochs:
            raise StateError(f"global shuffle: epoch {self._epoch} is past the last epoch ({self.epochs})")
        self._position = check_int(saved["position"], "position", "global shuffle")
        if self._position > self.positions:
            raise StateError(
                f"global shuffle: position {self._position} is past the epoch's {self.positions} positions"
            )
        taken = saved.get("taken", [])
        if not isinstance(taken, list):
            raise StateError("global shuffle: taken must be a list of positions")
        self._taken = sorted(check_int(i, "taken", "global shuffle") for i in taken)
        self.stats = StreamStats.from_json(saved["stats"])

    def state_dict(self) -> GlobalShuffleState:
        state = GlobalShuffleState(epoch=self._epoch, position=self._position, stats=self.stats.to_json())
        here = self._epoch * self.positions + self._position
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
        """Read the rows of this reader's next FETCH positions of the epoch (holes passed
        over); False at its end."""
        order = self.order(self._epoch)
        while True:
            positions = self._owned_positions(self._position, FETCH, within_window=True)
            self._next = 0
            if not len(positions):
                self._block, self._positions = None, positions
                return False
            rows = order.rows_at(positions)
            present = rows >= 0
            if present.any():
                self._block = self.source.block(rows[present])
                self._positions = positions[present]
                self._decode_next_window(order, int(positions[-1]))  # once this window's groups are held
                return True
            self._position = int(positions[-1]) + 1  # only holes: passed over

    def _decode_next_window(self, order: GlobalOrder, position: int) -> None:
        """With spread, once per window: have the row groups of this reader's units in the next
        window decoded ahead (the decode budget permitting), as a sequential read decodes its
        next groups while the current one is read."""
        if self.spread is None or self.units is None:
            return
        spread, size = self.spread[0], self.units.unit
        window = position // (spread * size) + 1
        if window == self._ahead_window or window * spread >= self.units.units:
            return
        self._ahead_window = window
        now = self._slots(window - 1)
        rows = order.rows_at(window * spread * size + self._slots(window))  # each unit's first row of the window
        self.source.decode_ahead(rows[rows >= 0], keep=len(now))

    def _slots(self, window: int) -> np.ndarray:
        """The slots of spread window ``window`` this reader takes rows from."""
        assert self.spread is not None and self.units is not None
        held = min(self.spread[0], self.units.units - window * self.spread[0])
        every = math.gcd(held, self.parts)  # position o: slot o mod held, taken by reader o mod parts
        return np.arange(self.part % every, held, every, dtype=np.int64)

    def _owned_positions(self, start: int, count: int, within_window: bool = False) -> np.ndarray:
        """This reader's next ``count`` positions of the epoch from ``start`` (fewer at its end),
        without those faster old readers took. ``within_window``: none past the end of a spread
        window, so one fetch never needs the row groups of two windows at once (a decode budget
        that holds one window's would otherwise evict rows the same fetch needs)."""
        base = self._epoch * self.positions
        while True:
            first = _first_owned(start, self.part, self.parts)
            end = self.positions
            if within_window and self.spread is not None and self.units is not None:
                span = self.spread[0] * self.units.unit
                end = min(end, (first // span + 1) * span)
            skip = {i - base for i in self._taken if base + first <= i < base + end}
            positions = np.arange(first, end, self.parts, dtype=np.int64)[: count + len(skip)]
            if skip:
                positions = positions[~np.isin(positions, np.fromiter(skip, dtype=np.int64))]
            if len(positions) or end >= self.positions:
                return positions[:count]
            start = end  # a window whose positions here were all taken

    def finished(self) -> bool:
        """Whether the last epoch has been read to its end (never, without a last epoch)."""
        if self.epochs is None or self._epoch + 1 < self.epochs or self._next < len(self._positions):
            return False
        order = self.order(self._epoch)
        start = self._position
        while True:  # past the holes this reader still owns, if any
            positions = self._owned_positions(start, FETCH)
            if not len(positions):
                return True
            if (order.rows_at(positions) >= 0).any():
                return False
            start = int(positions[-1]) + 1

    def order(self, epoch: int) -> GlobalOrder:
        """The permutation of ``epoch``."""
        if self.spread is None:
            return GlobalOrder(self.total, self.seed, epoch, self.window)
        return GlobalOrder(self.total, self.seed, epoch, None, self.spread[0], self.units)

    def close(self) -> None:
        self.source.close()

    def merge(self, states: list[GlobalShuffleState], olds: list[ReaderSplit], new: ReaderSplit) -> GlobalShuffleState:
        """Reader ``new``'s state from every old reader's: from the first position no old
        reader has taken, skipping the ones faster readers took beyond it. Positions are
        numbered ``epoch * positions + position`` across epochs."""
        total, parts = self.positions, olds[0].parts
        probes = []
        for state, old in zip(states, olds):
            probe = GlobalShuffleSource(
                self.source,
                seed=self.seed,
                window=self.window,
                epochs=self.epochs,
                split=old,
                spread=self.spread,
                units=self.units,
            )
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
            if old.part >= total:  # more readers than positions: this one owns none
                continue
            linear = next_owned(start, old.part)
            while linear < end:
                taken.add(linear)
                linear = next_owned(linear + 1, old.part)
        epoch, position = divmod(start, total)
        merged = GlobalShuffleState(
            epoch=epoch, position=position, stats=summed_stats([s["stats"] for s in states], new.part)
        )
        if self.epochs is not None and epoch >= self.epochs:
            merged = GlobalShuffleState(epoch=self.epochs - 1, position=total, stats=merged["stats"])
        if taken:
            merged["taken"] = sorted(taken)
        return merged

    def state_at(self, example: int) -> GlobalShuffleState:
        raise ConfigError("start_example does not apply to a global shuffle; resume from a state_dict")

    def can_seek(self) -> bool:
        """Whether :meth:`seek` can move without reading: always, but right after a resume on
        another world size (positions faster old readers took are skipped one by one)."""
        here = self._epoch * self.positions + self._position
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
            passed += self._pass_in_epoch(rows - passed)
            if passed == rows:
                return rows
            if self.epochs is not None and self._epoch + 1 >= self.epochs:
                return passed
            if self.part >= self.positions:  # more readers than positions: this one owns none, ever
                return passed
            self._epoch += 1
            self._position = 0
        return passed

    def _pass_in_epoch(self, rows: int) -> int:
        """Pass up to ``rows`` of this reader's rows in this epoch (all it has left if fewer);
        returns how many were passed. Closed form without holes; with them, counted a few
        thousand positions at a time."""
        order = self.order(self._epoch)
        if not order.has_holes:
            first = _first_owned(self._position, self.part, self.parts)
            left = max(0, -(-(self.positions - first) // self.parts))
            step = min(rows, left)
            if step:
                self._position = first + (step - 1) * self.parts + 1
            return step
        passed, start = 0, self._position
        while passed < rows:
            positions = np.arange(
                _first_owned(start, self.part, self.parts), self.positions, self.parts, dtype=np.int64
            )[: max(4 * FETCH, rows - passed)]
            if not len(positions):
                break
            present = np.flatnonzero(order.rows_at(positions) >= 0)
            if len(present) >= rows - passed:  # the last row to pass lies in this stretch
                self._position = int(positions[present[rows - passed - 1]]) + 1
                return rows
            if len(present):
                self._position = int(positions[present[-1]]) + 1  # where reading them would leave it
            passed += len(present)
            start = int(positions[-1]) + 1
        return passed


def _first_owned(position: int, part: int, parts: int) -> int:
    """The first position at or after ``position`` that reader ``part`` of ``parts`` takes."""
    return position + (part - position) % parts

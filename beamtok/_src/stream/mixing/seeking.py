"""A mix of packed caches that seeks its sources instead of reading them.

Readers that split a mix by examples each keep every k-th example of the one mixed stream.
Read naively, each reader reads the whole stream; with thousands of readers and sources that
is thousands of shards opened for a first batch. Here the mix is computed, not read: the
source of every position and its example number in that source come in closed form
(:mod:`beamtok._src.stream.mixing.positions`), each cached source maps an example number to a row
(:mod:`beamtok._src.stream.reading.source_rows`), so passing over other readers' examples costs
arithmetic (:meth:`SeekingMix.seek`) and only the examples a reader keeps are read.

It gives what the reading mix (:class:`~beamtok._src.stream.mixing.reading.MixSource`) gives over the
same sources, example for example: both ask the one rule of :mod:`beamtok._src.stream.mixing.rule`
where the stream stops and which positions are passed over. Here what the rule takes is
computed from the sources' lengths (known from row counts) for a whole block at once, where
the reading mix finds it by reading: a source with ``T`` examples in all (its epochs times
its rows an epoch; unbounded when it repeats forever) is exhausted at its draw number ``T``
and every later one, spent from the position of that draw, and past its first epoch from
the position of its draw number ``rows an epoch``.

The state is the next global position, each source's position (the number of its next
example: one integer a source, derived from the global position and checked on load), the
stop flag, the counts of what this reader handed out (per-source figures are computed from
the positions when asked, not kept), and weight changes made while training. A state of the
reading mix loads here, and this one there: the same mix is seeked by readers that split a mix
of packed caches by examples and read otherwise (on the fly, or split by shards), and a state
crosses between them as it crosses between a cache and its on-the-fly twin; the reading
mix's sources' states carry no example numbers, so the global position decides them here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from beamtok._src.base.errors import InputError, StateError
from beamtok._src.base.validate import check_bool, check_int
from beamtok._src.shards.items import Produced, ShardCursor
from beamtok._src.stream.mixing.base import MIX_KIND, SEEKING_MIX_KIND, MixBase, mix_kind
from beamtok._src.stream.mixing.mix_plan import MixPlan, changes_of, first_leaves
from beamtok._src.stream.mixing.positions import MixPositions, positions_of
from beamtok._src.stream.mixing.rule import NEVER, SourceStatus, empty_source_at, stop_offset
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.reading.source_rows import NumberedRows
from beamtok._src.stream.reading.stats import StreamStats
from beamtok._src.stream.state import SeekingMixState, check_keys, copy_state

__all__ = ["SeekingMix"]

UNBOUNDED = np.iinfo(np.int64).max


class SeekingMix(MixBase[SeekingMixState]):
    """The mixed stream of packed caches, read by seeking (see the module docstring)."""

    def __init__(self, sources: Sequence[NumberedRows], plan: MixPlan, example_parts: int) -> None:
        self.rows = list(sources)
        self.declared = plan
        self.part, self.parts = 0, 1  # every position is this node's; an example split downstream keeps its share
        self.example_parts = example_parts
        self.lengths = np.array([s.epoch_length for s in self.rows], dtype=np.int64)
        self.totals = np.array([UNBOUNDED if s.total is None else s.total for s in self.rows], dtype=np.int64)
        self.forever = np.array([s.epochs is None for s in self.rows])
        self.first_leaf = first_leaves([s.leaves for s in self.rows])
        self.reset(None)

    # ------------------------------------------------------------------ state

    def reset(self, state: SeekingMixState | None) -> None:
        self._start_plan()
        self._stats = StreamStats()
        self._set_plan(self.declared)
        if state is None:
            return
        saved: Any = copy_state(state)
        if not isinstance(saved, dict):
            raise StateError(f"mix: state must be a JSON object, got {type(saved).__name__}")
        if mix_kind(saved) == MIX_KIND:  # a reading mix's state: its sources' own states give the counts
            saved = self._from_reading(saved)
        saved = check_keys(saved, SeekingMixState, "mix")
        self._set_changes(changes_of(saved.get(self.CHANGES, []), len(self.rows)))
        self._index = check_int(saved["index"], "index", "mix")
        self._stopped = check_bool(saved["stopped"], "stopped", "mix")
        self._stats = StreamStats.from_json(saved["stats"])
        positions = saved["positions"]
        if not isinstance(positions, list) or len(positions) != len(self.rows):
            raise StateError(
                f"mix: the state holds {len(positions) if isinstance(positions, list) else '?'} source positions, this mix has {len(self.rows)} sources"
            )
        if [check_int(p, "positions", "mix") for p in positions] != self._positions.draws_before(self._index).tolist():
            raise StateError(
                f"mix: the sources' positions do not follow from global position {self._index} under this mix's weights (a state of another mix?)"
            )

    def _from_reading(self, state: dict[str, Any]) -> dict[str, Any]:
        """A reading mix's state in this mix's form: the global position decides the sources'."""
        children = state.get("sources")
        if not isinstance(children, list) or len(children) != len(self.rows):
            raise StateError(
                f"mix: the state holds {len(children) if isinstance(children, list) else '?'} sources, this mix has {len(self.rows)}"
            )
        total = StreamStats()
        for child in children:
            total.add(StreamStats.from_json(child.get("stats") if isinstance(child, dict) else None))
        carried = state.pop(self.CARRIED, None)
        if carried is not None:
            total.add(StreamStats.from_json(carried))
        index = check_int(state.get("index"), "index", "mix")
        self._set_changes(changes_of(state.get(self.CHANGES, []), len(self.rows)))
        converted = {k: v for k, v in state.items() if k != "sources"}
        converted.update(
            kind=SEEKING_MIX_KIND, positions=self._positions.draws_before(index).tolist(), stats=total.to_json()
        )
        return converted

    def state_dict(self) -> SeekingMixState:
        state = SeekingMixState(
            kind=SEEKING_MIX_KIND,
            index=self._index,
            positions=self._positions.draws_before(self._index).tolist(),
            stopped=self._stopped,
            stats=self._stats.to_json(),
        )
        if self._changes:
            state["weight_changes"] = self._changes_json()
        return state

    def _set_changes(self, changes: list[tuple[int, tuple[float, ...]]]) -> None:
        super()._set_changes(changes)
        self._set_plan(self.plan)

    def _set_plan(self, plan: MixPlan) -> None:
        """The closed-form positions of ``plan``, and what the rule needs of every source:
        where it is spent (its draw number ``total``) and where first drawn past its first
        epoch (its draw number ``rows an epoch``), as positions."""
        self._positions: MixPositions = positions_of(plan)
        spent_at = (
            [self._position_of(i, int(self.totals[i])) for i in range(len(self.rows))]
            if plan.max_epochs
            else [NEVER] * len(self.rows)
        )
        second_at = (
            [self._position_of(i, int(n)) for i, n in enumerate(self.lengths)]
            if plan.stop == "all_exhausted"
            else [NEVER] * len(self.rows)
        )
        self._status = SourceStatus(
            np.array(spent_at, dtype=np.int64), np.array(second_at, dtype=np.int64), (self.lengths == 0) & self.forever
        )

    def _position_of(self, source: int, draw: int) -> int:
        found = self._positions.draw_position(source, draw) if draw != UNBOUNDED else None
        return NEVER if found is None else found

    # ------------------------------------------------------------------ the stream

    def _scan(self, want: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``want`` positions that yield (fewer when the stream stops): their sources
        and example numbers, as arrays; moves the global position past them, or to where the
        stream stopped."""
        found: list[tuple[np.ndarray, np.ndarray]] = []
        have = 0
        size = self.plan.block_size
        while have < want and not self._stopped:
            block, offset = divmod(self._index, size)
            order = self._positions.block(block)
            sources = order.sources[offset:]
            draws = self._positions.counts_before_block(block)[sources] + order.within[offset:]
            exhausted = draws >= self.totals[sources]
            past_first = draws >= self.lengths[sources]
            positions = self._index + np.arange(len(sources))
            stop = stop_offset(self.plan, block, positions, sources, exhausted, past_first, self._status)
            end = len(sources) if stop is None else stop
            kept = np.flatnonzero(~exhausted[:end])[
                : want - have
            ]  # exhausted positions before a stop are passed over (caps)
            found.append((sources[kept], draws[kept]))
            have += len(kept)
            if have == want and len(kept):
                self._index += int(kept[-1]) + 1
            elif stop is not None:
                bad = int(sources[stop])
                if empty_source_at(self.plan, bad, bool(exhausted[stop]), self._status):
                    raise InputError(f"mix source {bad} yields no examples; it cannot be mixed at a weight above 0")
                self._index += stop
                self._stopped = True
            else:
                self._index = (block + 1) * size
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])

    def __next__(self) -> Any:
        sources, draws = self._scan(1)
        if not len(sources):
            raise StopIteration
        source = int(sources[0])
        rows = self.rows[source]
        block = rows.block(draws[:1])
        example = block.examples[0]
        produced = Produced(example, ShardCursor(), block.counts[0])
        self._stats.record(produced)
        leaf = int(rows.leaf_of(draws[:1])[0]) if rows.leaves > 1 else 0  # a mixed mix's own leaf
        return {**example, "source": self.first_leaf[source] + leaf}

    def can_seek(self) -> bool:
        """Always: passing examples is arithmetic on the mix's plan and the sources' row counts."""
        return True

    def seek(self, items: int) -> int:
        """Pass the next ``items`` examples without reading them; returns how many were
        passed (fewer where the stream stops). The counts keep only what was handed out."""
        return len(self._scan(items)[0]) if items > 0 else 0

    # ------------------------------------------------------------------ the rest

    def stats_json(self) -> dict[str, Any]:
        """The totals this reader handed out, and for each source, computed from the plan
        rather than counted: how many of its examples the whole mixed stream has drawn so far
        (every reader's, up to this reader's position) and the epoch its next one belongs to;
        ``proportions`` are those draws' shares."""
        out: dict[str, Any] = {**self._stats.to_json()}
        drawn = self._positions.draws_before(self._index)
        epochs = [int(p // n) if n else 0 for p, n in zip(drawn, self.lengths)]
        out["sources"] = [{"drawn": int(d), "epoch": e} for d, e in zip(drawn, epochs)]
        total = int(drawn.sum())
        out["proportions"] = [int(d) / total if total else 0.0 for d in drawn]
        out["weights"] = list(self.weights_now())
        if self._changes:
            out["weight_changes"] = self._changes_json()
        if self.plan.max_epochs is not None:
            out["spent"] = [
                bool(self.plan.max_epochs[i] is not None and drawn[i] > self.totals[i]) for i in range(len(self.rows))
            ]
        return out

    def merge(self, states: list[SeekingMixState], olds: list[ReaderSplit], new: ReaderSplit) -> SeekingMixState:
        raise StateError("a seeking mix is split by examples: merge the example split, not the mix")

    def close(self) -> None:
        for rows in self.rows:
            rows.close()

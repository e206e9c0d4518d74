"""The reading mix: a mix that reads its sources (shard sources, global shuffles, other mixes).

Each position's source comes from the plan (:mod:`beamtok._src.stream.mixing.mix_plan`); the position takes
that source's next example. Readers that split by shards fill positions ``part, part + parts,
...`` from their own shards of each source; readers that split by examples each read the whole
stream and keep their turns downstream. Where the stream stops is the rule of
:mod:`beamtok._src.stream.mixing.rule`, asked at a position when its source has run out (exhausted) or
has just passed its first epoch, with what reading has shown so far: a source that ran out or
reports itself finished is spent, one whose epoch moved past 0 is past its first epoch.

The state is the next global position, each source's own state (so a source crosses modes:
a cached source resumes its on-the-fly twin), the stop flag and the weight changes made while
training. A state of the seeking mix (:mod:`beamtok._src.stream.mixing.seeking`) loads here: the same
mix is seeked when its sources are packed caches read by readers that split by examples, and
read otherwise (on the fly, or split by shards), and a state must cross between the two as it
crosses between a cache and its on-the-fly twin. It holds each source's next example number
instead of the sources' states, so each source starts over and reads through to it at the
first ``next()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from beamtok._src.base.errors import InputError, StateError
from beamtok._src.base.validate import check_bool, check_int
from beamtok._src.stream.global_order.shuffle_source import GlobalShuffleSource
from beamtok._src.stream.mixing.base import MIX_KIND, SEEKING_MIX_KIND, MixBase, mix_kind
from beamtok._src.stream.mixing.mix_plan import MixPlan, changes_of, first_leaves
from beamtok._src.stream.mixing.rule import NEVER, SourceStatus, empty_source_at, stop_offset
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.reading.source import ShardSource
from beamtok._src.stream.reading.stats import StreamStats
from beamtok._src.stream.state import MixState, NodeState, check_keys, copy_state

__all__ = ["MixSource"]


class MixSource(MixBase[MixState]):
    """Yields the mixed stream of several sources, reading them."""

    def __init__(
        self,
        sources: Sequence[ShardSource | GlobalShuffleSource | MixSource],
        plan: MixPlan,
        split: ReaderSplit | None = None,
    ) -> None:
        self.sources = list(sources)
        self.declared = plan
        shared = split is not None and split.mode == "shards"  # an example split splits the mixed stream instead
        self.part, self.parts = (split.part, split.parts) if shared and split is not None else (0, 1)
        self.example_parts = split.parts if split is not None and not shared else 1
        self.first_leaf = first_leaves([s.leaves if isinstance(s, MixSource) else 1 for s in self.sources])
        self.forever = np.array([s.epochs is None for s in self.sources])
        self.reset(None)

    def reset(self, state: MixState | None) -> None:
        self._start_plan()
        self._block = -1
        self._order = np.zeros(0, dtype=np.int64)
        self._carried: StreamStats | None = None
        self._read_through: list[int] | None = None  # each source's examples to read past at the first next()
        if state is None:
            for source in self.sources:
                source.reset(None)
            return
        saved: dict[str, Any] = copy_state(state)
        if mix_kind(saved) == SEEKING_MIX_KIND:
            saved = self._from_seeking(saved)
        saved = check_keys(saved, MixState, "mix")
        self._set_changes(changes_of(saved.get(self.CHANGES, []), len(self.sources)))
        children = saved["sources"]
        if not isinstance(children, list) or len(children) != len(self.sources):
            raise StateError(
                f"mix: the state holds {len(children) if isinstance(children, list) else '?'} sources, this mix has {len(self.sources)}"
            )
        for source, child in zip(self.sources, children):
            source.reset(child)
        self._index = check_int(saved["index"], "index", "mix")
        self._stopped = check_bool(saved["stopped"], "stopped", "mix")
        if self.CARRIED in saved:
            self._carried = StreamStats.from_json(saved[self.CARRIED])

    def _from_seeking(self, state: dict[str, Any]) -> dict[str, Any]:
        """A seeking mix's state in this mix's form (why: the module docstring): every source
        starts over and reads through to its position at the first ``next()``; the counts
        handed out are carried as totals."""
        if self.parts > 1:
            raise StateError(
                "mix: a state of readers that split the mix by examples resumes only readers that split by examples"
            )
        positions = state.pop("positions")
        if not isinstance(positions, list) or len(positions) != len(self.sources):
            raise StateError(
                f"mix: the state holds {len(positions) if isinstance(positions, list) else '?'} source positions, this mix has {len(self.sources)}"
            )
        self._read_through = [check_int(p, "positions", "mix") for p in positions]
        state[self.CARRIED] = state.pop("stats", StreamStats().to_json())
        state["sources"] = [None] * len(self.sources)
        state["kind"] = MIX_KIND
        return state

    def state_dict(self) -> MixState:
        state = MixState(
            kind=MIX_KIND, index=self._index, sources=[s.state_dict() for s in self.sources], stopped=self._stopped
        )
        if self._carried is not None:
            state["stats"] = self._carried.to_json()
        if self._changes:
            state["weight_changes"] = self._changes_json()
        return state

    def merge(self, states: list[MixState], olds: list[ReaderSplit], new: ReaderSplit) -> MixState:
        """Each source's states merged (see ``beamtok._src.stream.ranks.elastic``). The sequence of
        sources continues after the last position any old reader filled: new reader ``part``
        takes positions ``part, part + parts, ...`` counted from there. No position's
        source is drawn twice; old readers that kept in step leave no gap, and one that fell
        behind leaves fewer positions unfilled than there were old readers."""
        checked = [check_keys(copy_state(s), MixState, "mix") for s in states]
        for state in checked:
            if not isinstance(state["sources"], list) or len(state["sources"]) != len(self.sources):
                raise StateError(f"mix: a state holds another number of sources than this mix's {len(self.sources)}")
        sources: list[NodeState] = [
            source.merge([s["sources"][i] for s in checked], olds, new) for i, source in enumerate(self.sources)
        ]
        old_parts = olds[0].parts if olds[0].mode == "shards" else 1
        start = max(check_int(s["index"], "index", "mix") - old_parts for s in checked) + 1  # after the last taken
        if new.mode == "shards":
            start += new.part
        merged = MixState(
            kind=MIX_KIND, index=start, sources=sources, stopped=all(s["stopped"] is True for s in checked)
        )
        changes: dict[int, tuple[float, ...]] = {}
        for state in checked:  # every old reader was told the same changes; a conflict means they were not
            for begin, ws in changes_of(state.get(self.CHANGES, []), len(self.sources)):
                if changes.get(begin, ws) != ws:
                    raise StateError(
                        f"mix: old readers disagree on the weights from example {begin}: {list(changes[begin])} and {list(ws)}"
                    )
                changes[begin] = ws
        if changes:
            merged["weight_changes"] = [[begin, list(ws)] for begin, ws in sorted(changes.items())]
        return merged

    def __iter__(self) -> MixSource:
        return self

    def _catch_up_sources(self) -> None:
        """After a seeking mix's state: read each source past the examples drawn before."""
        skips, self._read_through = self._read_through or [], None
        for source, skip in zip(self.sources, skips):
            for _ in range(skip):
                if next(source, None) is None:
                    break
            source.stats = StreamStats()  # read through, not handed out

    def __next__(self) -> Any:
        if self._read_through is not None:
            self._catch_up_sources()
        while True:
            if self._stopped:
                raise StopIteration
            block, position = divmod(self._index, self.plan.block_size)
            if block != self._block:
                self._block, self._order = block, self.plan.block_order(block)
            chosen = int(self._order[position])
            source = self.sources[chosen]
            try:
                example = next(source)
                exhausted = False
            except StopIteration:
                exhausted = True
            past_first = not exhausted and self.plan.stop == "all_exhausted" and source.epoch > 0
            if exhausted or past_first:  # the only positions the rule may stop at
                status = self._status(chosen, exhausted)
                here = np.array([self._index], dtype=np.int64)
                stop = stop_offset(
                    self.plan, block, here, np.array([chosen]), np.array([exhausted]), np.array([past_first]), status
                )
                if stop is not None:
                    self._stopped = True
                    if empty_source_at(self.plan, chosen, exhausted, status):
                        raise InputError(
                            f"mix source {chosen} yields no examples; it cannot be mixed at a weight above 0"
                        )
                    raise StopIteration
            self._index += self.parts
            if not exhausted:  # an exhausted position the rule runs on past is passed over; the others fill the stream
                break
        if not isinstance(example, dict):
            return example
        inner = example["source"] if isinstance(source, MixSource) else 0  # a mixed mix's own leaf
        return {**example, "source": self.first_leaf[chosen] + inner}

    def _status(self, chosen: int, exhausted: bool) -> SourceStatus:
        """What reading has shown of the sources, as of this position (0: from now on)."""
        spent = np.array([(i == chosen and exhausted) or self._spent(i) for i in range(len(self.sources))])
        second = np.array([s.epoch > 0 for s in self.sources])
        return SourceStatus(np.where(spent, 0, NEVER), np.where(second, 0, NEVER), self.forever)

    def close(self) -> None:
        for source in self.sources:
            source.close()

    # ------------------------------------------------------------------ as a source of another mix

    @property
    def leaves(self) -> int:
        """How many sources that are not mixes it reads, its mixed mixes' counted through:
        what ``source`` numbers."""
        return int(self.first_leaf[-1])

    @property
    def epochs(self) -> int | None:
        """As another mix's source: None when this mix never ends, else 1 (a mix that ends is
        read once; the outer mix refuses to restart it)."""
        return None if self.declared.never_ends else 1

    @property
    def epoch(self) -> int:
        """1 once this mix has ended, else 0 (its one epoch)."""
        return 1 if self._stopped else 0

    def finished(self) -> bool:
        """Whether this mix has ended."""
        return self._stopped

    @property
    def stats(self) -> StreamStats:
        """What this mix has handed out, over its sources (and counts carried from a state)."""
        total = StreamStats()
        for source in self.sources:
            total.add(source.stats)
        if self._carried is not None:
            total.add(self._carried)
        return total

    @stats.setter
    def stats(self, value: StreamStats) -> None:
        # an outer mix reading this one through to a position: what was read counts as ``value``
        for source in self.sources:
            source.stats = StreamStats()
        self._carried = value

    def _spent(self, i: int) -> bool:
        source = self.sources[i]
        return source.epochs is not None and source.finished()

    def stats_json(self) -> dict[str, Any]:
        """Totals over the sources, each source's own stats (with its epoch), and the realised
        proportions of examples."""
        out: dict[str, Any] = {**self.stats.to_json()}
        out["sources"] = [s.stats_json() for s in self.sources]
        seen = sum(s.stats.examples for s in self.sources)
        out["proportions"] = [s.stats.examples / seen if seen else 0.0 for s in self.sources]
        out["weights"] = list(self.weights_now())
        if self._changes:
            out["weight_changes"] = self._changes_json()
        if self.plan.max_epochs is not None:
            out["spent"] = [self._spent(i) for i in range(len(self.sources))]
        return out

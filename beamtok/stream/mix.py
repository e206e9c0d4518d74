"""mix(datasets, weights): weighted mixing of several datasets, decided globally.

The source of global example ``g`` is a pure function of (seed, g, weights): the stream is cut
into blocks of ``block_size`` examples; each block holds exactly ``counts[i]`` examples of
source ``i`` (the weights turned into whole numbers by largest remainder, so a small weight
keeps its rate instead of rounding to zero), in an order given by a permutation keyed by
``(seed, block)``. Nothing depends on workers or timing, so the mix is the same for any
number of tokenization workers, and every source's examples come in that source's own order.

Readers that split by shards (``shard_by_rank(..., split="shards")`` and DataLoader workers)
each read their own shards of every source but share the one global sequence of sources:
reader ``part`` of ``parts`` takes global positions ``part, part + parts, ...`` (counted from
where the old readers stopped after a resume on another world size) and fills
each with the next example of that position's source from its own shards. Taken in turn, the
readers give the sources in exactly the order one reader would, so every block holds its
exact counts over all readers for any number of ranks and workers (which examples fill the
positions depends on how the shards are dealt out).

Each mixed example carries ``source``, the index of the dataset it came from (a mixed mix's
sources numbered through, depth first). The state is
the reader's next global position, each source's own state and a stop flag: O(1), no random
generator dumped, no buffer. A source's state is its shard source's, so it crosses modes (a
cached source resumes its on-the-fly twin). Weights may change at block boundaries: declared
(a schedule of ``(start_example, weights)``), or set while training (``set_weights``, from the
loss per domain, say), effective from the next block boundary no reader has passed; changes
made while training are kept in the state, so a resume replays the same schedule.

A repetition cap (``max_epochs``) lets a source be read at most that many times; once a
capped source is spent, the positions drawn for it are passed over and the others fill the
stream, which ends when every source that can still be drawn (with weight in the current
weight stage or a later one) is spent.

Stop rules: ``"never"`` (sources restart when exhausted, reshuffled by their own epoch),
``"first_exhausted"`` (the mix ends when any source ends), ``"all_exhausted"`` (sources that
end keep cycling until the last one ends its first epoch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok.base.errors import ConfigError, InputError, StateError
from beamtok.base.sizes import MAX_BLOCK, check_ceiling
from beamtok.base.validate import check_choice
from beamtok.base.validate import check_int as check_option
from beamtok.stream.global_shuffle import GlobalShuffleSource
from beamtok.stream.node import RootSource
from beamtok.stream.reader_split import ReaderSplit
from beamtok.stream.source import ShardSource
from beamtok.stream.state import check_int, check_keys, copy_state
from beamtok.stream.stats import StreamStats

__all__ = ["STOP_RULES", "MixPlan", "MixSource", "block_counts", "changes_of", "first_leaves"]

STOP_RULES = ("never", "first_exhausted", "all_exhausted")
DEFAULT_BLOCK = 4096


def block_counts(weights: Sequence[float], block_size: int) -> list[int]:
    """Examples of each source in a block: ``block_size`` split by ``weights``, rounded by
    largest remainder (ties to the lower source index)."""
    total = float(sum(weights))
    exact = [w * block_size / total for w in weights]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[: block_size - sum(counts)]:
        counts[i] += 1
    return counts


@dataclass(frozen=True)
class MixPlan:
    """The mixing rule: weights (possibly a schedule), seed, stop rule and block size."""

    schedule: tuple[tuple[int, tuple[float, ...]], ...]
    seed: int = 0
    stop: str = "never"
    block_size: int = DEFAULT_BLOCK
    max_epochs: tuple[int | None, ...] | None = None  # each source's repetition cap (None: no cap)

    @classmethod
    def make(
        cls, sources: int, weights: Any, *, seed: int, stop: str, block_size: int | None, max_epochs: Any = None
    ) -> MixPlan:
        check_option(seed, "seed")
        check_choice(stop, "stop", STOP_RULES)
        caps = _caps(max_epochs, sources)
        if caps is not None and stop != "never":
            raise ConfigError(f"max_epochs caps sources of a mix that never stops by itself (stop='never'), not stop={stop!r}")
        schedule = _schedule(weights, sources)
        for _, ws in schedule:  # weights are shares of their sum: a source's share is w / sum(ws)
            for i, w in enumerate(ws):
                if 0 < w / sum(ws) < 1 / MAX_BLOCK:
                    raise ConfigError(
                        f"source {i}'s weight {w} is {w / sum(ws):.3g} of the total weight: one of its examples would need a block of "
                        f"{int(np.ceil(sum(ws) / w)):,} examples; the smallest share a mix takes is 1/{MAX_BLOCK:,} "
                        f"(here a weight of {sum(ws) / MAX_BLOCK:.3g}): raise it, or drop the source"
                    )
        if block_size is None:
            smallest = min(w / sum(ws) for _, ws in schedule for w in ws if w > 0)
            block_size = min(MAX_BLOCK, max(DEFAULT_BLOCK, int(np.ceil(1 / smallest))))
        check_option(block_size, "block_size", minimum=1)
        check_ceiling(block_size, "block_size", MAX_BLOCK, "examples")
        for start, ws in schedule:
            if start % block_size:
                raise ConfigError(f"a weight schedule stage starts at example {start}, not at a block boundary (block_size={block_size})")
            for i, (w, n) in enumerate(zip(ws, block_counts(ws, block_size))):
                if w > 0 and n == 0:
                    raise ConfigError(
                        f"source {i}'s weight {w} gets no example in a block of {block_size}; "
                        f"use block_size >= {int(np.ceil(sum(ws) / w))}"
                    )
        return cls(schedule, seed, stop, block_size, caps)

    def with_changes(self, changes: Sequence[tuple[int, tuple[float, ...]]]) -> MixPlan:
        """This plan with weight changes made while training merged into its schedule: at
        each block the stage that started last rules (a change made while training over a
        declared stage starting at the same example)."""
        if not changes:
            return self
        merged = sorted([*((start, 0, ws) for start, ws in self.schedule), *((start, 1, ws) for start, ws in changes)])
        schedule: list[tuple[int, tuple[float, ...]]] = []
        for start, _, ws in merged:
            if schedule and schedule[-1][0] == start:
                schedule[-1] = (start, ws)
            else:
                schedule.append((start, ws))
        return MixPlan.make(
            len(self.schedule[0][1]), schedule, seed=self.seed, stop=self.stop, block_size=self.block_size, max_epochs=self.max_epochs
        )

    @property
    def never_ends(self) -> bool:
        """Whether the mixed stream goes on forever: it never stops and caps no source."""
        return self.stop == "never" and not any(cap is not None for cap in self.max_epochs or ())

    def stage_of(self, block: int) -> int:
        """The index in ``schedule`` of the weight stage ``block`` belongs to."""
        start = block * self.block_size
        return max(i for i, (first, _) in enumerate(self.schedule) if first <= start)

    def drawn_from(self, block: int) -> set[int]:
        """The sources with weight in the stage of ``block`` or a later one: those a position
        from ``block`` on can still draw."""
        return {i for _, ws in self.schedule[self.stage_of(block) :] for i, w in enumerate(ws) if w > 0}

    def weights_at(self, block: int) -> tuple[float, ...]:
        return self.schedule[self.stage_of(block)][1]

    def block_order(self, block: int) -> np.ndarray:
        """The source of each example of ``block``, in order."""
        counts = block_counts(self.weights_at(block), self.block_size)
        sources = np.repeat(np.arange(len(counts)), counts)
        return sources[np.random.default_rng([self.seed, block]).permutation(self.block_size)]

    def counts_json(self) -> dict[str, Any]:
        """The rule as a state's plan keeps it: each weight stage as the examples of each
        source in a block (what decides the order, in small integers: a mix of 1,000 sources
        keeps its weights in a few KB however they were written), seed, stop rule, caps."""
        out = {**self.to_json(), "schedule": [[start, block_counts(ws, self.block_size)] for start, ws in self.schedule]}
        out["per_block"] = out.pop("schedule")
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schedule": [[start, list(ws)] for start, ws in self.schedule],
            "seed": self.seed,
            "stop": self.stop,
            "block_size": self.block_size,
        }
        if self.max_epochs is not None:  # only when set, so the fingerprints of mixes without caps stay as they were
            out["max_epochs"] = list(self.max_epochs)
        return out


def _caps(max_epochs: Any, sources: int) -> tuple[int | None, ...] | None:
    """Each source's repetition cap: one for all, or one per source (None: no cap)."""
    if max_epochs is None:
        return None
    caps = [max_epochs] * sources if not isinstance(max_epochs, (list, tuple)) else list(max_epochs)
    if len(caps) != sources:
        raise ConfigError(f"{len(caps)} max_epochs for {sources} sources")
    for cap in caps:
        if cap is not None:
            check_option(cap, "max_epochs", minimum=1)
    return tuple(caps)


def _schedule(weights: Any, sources: int) -> tuple[tuple[int, tuple[float, ...]], ...]:
    """A list of weights, or a list of ``(start_example, weights)`` stages starting at 0."""
    if weights is None:
        weights = [1.0] * sources
    stages = weights if weights and isinstance(weights[0], (tuple, list)) else [(0, weights)]
    out: list[tuple[int, tuple[float, ...]]] = []
    for stage in stages:
        if len(stage) != 2:
            raise ConfigError(f"a weight schedule stage is (start_example, weights), got {stage!r}")
        start, ws = stage
        check_option(start, "schedule start_example")
        if len(ws) != sources:
            raise ConfigError(f"{len(ws)} weights for {sources} sources")
        if any(not isinstance(w, (int, float)) or isinstance(w, bool) or not w >= 0 or w == float("inf") for w in ws) or sum(ws) <= 0:
            raise ConfigError(f"weights must be finite, non-negative numbers with a positive sum, got {list(ws)}")
        if out and start <= out[-1][0]:
            raise ConfigError("weight schedule stages must start at increasing example indices")
        out.append((start, tuple(float(w) for w in ws)))
    if out[0][0] != 0:
        raise ConfigError("the first weight schedule stage must start at example 0")
    return tuple(out)


def first_leaves(leaves: Sequence[int]) -> list[int]:
    """The ``source`` number of each source's first leaf, then the number of leaves: a mix's
    examples are numbered by the sources that are not mixes, depth first (a mixed mix's
    leaves take consecutive numbers), as a flattened mix numbers them."""
    out = [0]
    for n in leaves:
        out.append(out[-1] + n)
    return out


def changes_of(saved: Any, sources: int) -> list[tuple[int, tuple[float, ...]]]:
    """Weight changes ``[[start_example, weights], ...]`` from a state, checked."""
    if not isinstance(saved, list) or not all(isinstance(c, list) and len(c) == 2 and isinstance(c[1], list) for c in saved):
        raise StateError("mix: weight_changes must be a list of [start_example, weights] pairs")
    out = []
    for start, ws in saved:
        check_int(start, "weight_changes start", "mix")
        if len(ws) != sources or any(not isinstance(w, (int, float)) or isinstance(w, bool) or not 0 <= w < float("inf") for w in ws) or not sum(ws) > 0:
            raise StateError(f"mix: weight_changes: weights must be {sources} finite, non-negative numbers with a positive sum, got {ws!r}")
        out.append((start, tuple(float(w) for w in ws)))
    return out


class MixSource(RootSource):
    """Yields the mixed stream of several shard sources."""

    KEYS: tuple[str, ...] = ("index", "sources", "stopped")
    CHANGES = "weight_changes"  # [start_example, weights] set while training; only when there are any
    CARRIED = "stats"  # counts carried from a seeking mix's state (its sources' own are not kept); only then

    def __init__(self, sources: Sequence[ShardSource | GlobalShuffleSource | MixSource], plan: MixPlan, split: ReaderSplit | None = None) -> None:
        self.sources = list(sources)
        self.declared = plan
        self.plan = plan
        shared = split is not None and split.mode == "shards"  # an example split splits the mixed stream instead
        self.part, self.parts = (split.part, split.parts) if shared and split is not None else (0, 1)
        self.example_parts = split.parts if split is not None and not shared else 1  # readers taking turns downstream
        self.first_leaf = first_leaves([s.leaves if isinstance(s, MixSource) else 1 for s in self.sources])
        self.reset(None)

    @classmethod
    def describe_state(cls, state: Any, indent: str = "") -> list[str]:
        """A saved mix state's own position in words (its sources' states are described by
        their shard sources)."""
        if not isinstance(state, dict) or "sources" not in state:
            return [f"{indent}mix: unreadable ({state!r})"]
        lines = [f"{indent}mix: {state.get('index')} examples decided so far (the global index), stopped: {state.get('stopped')}"]
        for change in state.get(cls.CHANGES) or []:
            if isinstance(change, list) and len(change) == 2:
                lines.append(f"{indent}  weights set while training: {change[1]} from global example {change[0]:,}")
        return lines

    def reset(self, state: dict[str, Any] | None) -> None:
        self._index = self.part  # the next global position this reader fills
        self._stopped = False
        self._block = -1
        self._order = np.zeros(0, dtype=np.int64)
        self._changes: list[tuple[int, tuple[float, ...]]] = []
        self._carried: StreamStats | None = None
        self._read_through: list[int] | None = None  # each source's examples to read past at the first next()
        self.plan = self.declared
        if state is None:
            for source in self.sources:
                source.reset(None)
            return
        state = copy_state(state)
        if isinstance(state, dict) and "positions" in state:
            state = self._from_seeking(state)
        optional = tuple(k for k in (self.CHANGES, self.CARRIED) if isinstance(state, dict) and k in state)
        state = check_keys(state, (*self.KEYS, *optional), "mix")
        self._set_changes(changes_of(state.get(self.CHANGES, []), len(self.sources)))
        children = state["sources"]
        if not isinstance(children, list) or len(children) != len(self.sources):
            raise StateError(f"mix: the state holds {len(children) if isinstance(children, list) else '?'} sources, this mix has {len(self.sources)}")
        for source, child in zip(self.sources, children):
            source.reset(child)
        self._index = check_int(state["index"], "index", "mix")
        if not isinstance(state["stopped"], bool):
            raise StateError(f"mix: stopped must be a boolean, got {state['stopped']!r}")
        self._stopped = state["stopped"]
        if self.CARRIED in state:
            self._carried = StreamStats.from_json(state[self.CARRIED])

    def _from_seeking(self, state: dict[str, Any]) -> dict[str, Any]:
        """A seeking mix's state (beamtok.stream.mix_seek) in this mix's form: every source
        starts over and reads through to its position at the first ``next()``; the counts
        handed out are carried as totals."""
        if self.parts > 1:
            raise StateError("mix: a state of readers that split the mix by examples resumes only readers that split by examples")
        positions = state.pop("positions")
        if not isinstance(positions, list) or len(positions) != len(self.sources):
            raise StateError(f"mix: the state holds {len(positions) if isinstance(positions, list) else '?'} source positions, this mix has {len(self.sources)}")
        self._read_through = [check_int(p, "positions", "mix") for p in positions]
        state[self.CARRIED] = state.pop("stats", StreamStats().to_json())
        state["sources"] = [None] * len(self.sources)
        return state

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"index": self._index, "sources": [s.state_dict() for s in self.sources], "stopped": self._stopped}
        if self._carried is not None:
            state[self.CARRIED] = self._carried.to_json()
        if self._changes:
            state[self.CHANGES] = [[start, list(ws)] for start, ws in self._changes]
        return state

    def set_weights(self, weights: Sequence[float]) -> int:
        """Mix by ``weights`` from the first block boundary at or after the first global
        position no reader has taken (readers in step agree on it); returns that position.
        Kept in the state, so a resume replays it."""
        if self.example_parts > 1:  # every reader reads the mixed stream and keeps its turns: round up to a turn
            first_untaken = ((self._index - 1) // self.example_parts + 1) * self.example_parts
        else:
            first_untaken = self._index - self.part  # readers in step: every position before it is taken, none after
        start = -(-first_untaken // self.plan.block_size) * self.plan.block_size
        weights = tuple(weights)
        changes = [c for c in self._changes if c[0] != start] + [(start, weights)]
        try:
            self._set_changes(changes_of([[s, list(ws)] for s, ws in changes], len(self.declared.schedule[0][1])))
        except StateError as e:
            raise ConfigError(str(e).replace("mix: weight_changes: ", "set_weights: ")) from None
        return start

    def _set_changes(self, changes: list[tuple[int, tuple[float, ...]]]) -> None:
        try:
            plan = self.declared.with_changes(changes)
        except ConfigError as e:
            raise StateError(f"mix: weight_changes: {e}") from None
        self._changes, self.plan = sorted(changes), plan  # a change starts past every cached block: they stay right

    def weights_now(self) -> tuple[float, ...]:
        """The weights of the block holding this reader's next position."""
        return self.plan.weights_at(self._index // self.plan.block_size)

    def merge(self, states: list[dict[str, Any]], olds: list[ReaderSplit], new: ReaderSplit) -> dict[str, Any]:
        """Each source's states merged (see ``beamtok.stream.elastic``). The sequence of
        sources continues after the last position any old reader filled: new reader ``part``
        takes positions ``part, part + parts, ...`` counted from there. No position's
        source is drawn twice; old readers that kept in step leave no gap, and one that fell
        behind leaves fewer positions unfilled than there were old readers."""
        states = [check_keys(copy_state(s), (*self.KEYS, self.CHANGES) if isinstance(s, dict) and self.CHANGES in s else self.KEYS, "mix") for s in states]
        for state in states:
            if not isinstance(state["sources"], list) or len(state["sources"]) != len(self.sources):
                raise StateError(f"mix: a state holds another number of sources than this mix's {len(self.sources)}")
        sources = [source.merge([s["sources"][i] for s in states], olds, new) for i, source in enumerate(self.sources)]
        old_parts = olds[0].parts if olds[0].mode == "shards" else 1
        start = max(check_int(s["index"], "index", "mix") - old_parts for s in states) + 1  # after the last taken
        if new.mode == "shards":
            start += new.part
        merged: dict[str, Any] = {"index": start, "sources": sources, "stopped": all(s["stopped"] is True for s in states)}
        changes: dict[int, tuple[float, ...]] = {}
        for state in states:  # every old reader was told the same changes; a conflict means they were not
            for begin, ws in changes_of(state.get(self.CHANGES, []), len(self.sources)):
                if changes.get(begin, ws) != ws:
                    raise StateError(f"mix: old readers disagree on the weights from example {begin}: {list(changes[begin])} and {list(ws)}")
                changes[begin] = ws
        if changes:
            merged[self.CHANGES] = [[begin, list(ws)] for begin, ws in sorted(changes.items())]
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
                break
            except StopIteration:
                if self.plan.stop != "first_exhausted" and source.epochs is None:
                    raise InputError(f"mix source {chosen} yields no examples; it cannot be mixed at a weight above 0") from None
                if self.plan.max_epochs is None:
                    self._stopped = True
                    raise
                if self._all_spent(block):  # every source with weight has read its capped epochs
                    self._stopped = True
                    raise
                self._index += self.parts  # a spent source's position is passed over; the others fill the stream
        if self.plan.stop == "all_exhausted" and source.epoch > 0 and self._all_exhausted(block):
            self._stopped = True  # the last source just ended its first epoch
            raise StopIteration
        self._index += self.parts
        if not isinstance(example, dict):
            return example
        inner = example["source"] if isinstance(source, MixSource) else 0  # a mixed mix's own leaf
        return {**example, "source": self.first_leaf[chosen] + inner}

    def _all_spent(self, block: int) -> bool:
        """Whether every source that can still be drawn (weight in the stage of ``block`` or a
        later one) has read its capped epochs."""
        assert self.plan.max_epochs is not None
        return all(self.plan.max_epochs[i] is not None and self._spent(i) for i in self.plan.drawn_from(block))

    def _spent(self, i: int) -> bool:
        source = self.sources[i]
        return source.epochs is not None and source.finished()

    def _all_exhausted(self, block: int) -> bool:
        weights = self.plan.weights_at(block)
        return all(s.epoch > 0 for s, w in zip(self.sources, weights) if w > 0)

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

    def stats_json(self) -> dict[str, Any]:
        """Totals over the sources, each source's own stats (with its epoch), and the realised
        proportions of examples."""
        out = self.stats.to_json()
        out["sources"] = [s.stats_json() for s in self.sources]
        seen = sum(s.stats.examples for s in self.sources)
        out["proportions"] = [s.stats.examples / seen if seen else 0.0 for s in self.sources]
        out["weights"] = list(self.weights_now())
        if self._changes:
            out["weight_changes"] = [[start, list(ws)] for start, ws in self._changes]
        if self.plan.max_epochs is not None:
            out["spent"] = [self._spent(i) for i in range(len(self.sources))]
        return out

    def state_at(self, example: int) -> dict[str, Any]:
        raise ConfigError("start_example does not apply to a mix; resume from a state_dict")

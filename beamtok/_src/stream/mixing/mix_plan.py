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

This module holds the plan; the stop, cap and empty-source rules are one function
(:mod:`beamtok._src.stream.mixing.rule`) that both live forms ask: the reading mix
(:mod:`beamtok._src.stream.mixing.reading`, which reads its sources) and the seeking mix
(:mod:`beamtok._src.stream.mixing.seeking`, which computes positions over packed caches), siblings over
:mod:`beamtok._src.stream.mixing.base`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.sizes import MAX_BLOCK, check_ceiling
from beamtok._src.base.validate import check_choice, check_int
from beamtok._src.base.validate import check_int as check_option

__all__ = ["STOP_RULES", "MixPlan", "block_counts", "changes_of", "first_leaves"]

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
            raise ConfigError(
                f"max_epochs caps sources of a mix that never stops by itself (stop='never'), not stop={stop!r}"
            )
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
                raise ConfigError(
                    f"a weight schedule stage starts at example {start}, not at a block boundary (block_size={block_size})"
                )
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
            len(self.schedule[0][1]),
            schedule,
            seed=self.seed,
            stop=self.stop,
            block_size=self.block_size,
            max_epochs=self.max_epochs,
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
        out = {
            **self.to_json(),
            "schedule": [[start, block_counts(ws, self.block_size)] for start, ws in self.schedule],
        }
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


def checked_weights(
    weights: Any, sources: int, error: type[ConfigError] | type[StateError] = ConfigError, where: str = ""
) -> tuple[float, ...]:
    """The one rule for a mix's weights: one per source, each a finite, non-negative number
    (not a bool), with a positive sum.

    Args:
        weights: The weights as given (a list or tuple).
        sources: How many sources the mix has.
        error: The error to raise: ConfigError for options, StateError for a saved state.
        where: What the message names first (``"mix: weight_changes: "``...).

    Returns:
        The weights as floats.
    """
    if not isinstance(weights, (list, tuple)) or len(weights) != sources:
        count = len(weights) if isinstance(weights, (list, tuple)) else type(weights).__name__
        raise error(f"{where}{count} weights for {sources} sources")
    if any(
        not isinstance(w, (int, float)) or isinstance(w, bool) or not 0 <= w < float("inf") for w in weights
    ) or not (sum(weights) > 0):
        raise error(f"{where}weights must be finite, non-negative numbers with a positive sum, got {list(weights)!r}")
    return tuple(float(w) for w in weights)


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
        checked = checked_weights(ws, sources)
        if out and start <= out[-1][0]:
            raise ConfigError("weight schedule stages must start at increasing example indices")
        out.append((start, checked))
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
    if not isinstance(saved, list) or not all(
        isinstance(c, list) and len(c) == 2 and isinstance(c[1], list) for c in saved
    ):
        raise StateError("mix: weight_changes must be a list of [start_example, weights] pairs")
    out = []
    for start, ws in saved:
        check_int(start, "weight_changes start", "mix")
        out.append((start, checked_weights(ws, sources, StateError, "mix: weight_changes: ")))
    return out

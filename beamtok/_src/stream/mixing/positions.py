"""Closed-form answers about a mix's sequence of sources, without walking it.

A :class:`~beamtok._src.stream.mixing.mix_plan.MixPlan` decides the source of global position ``g`` from
``(seed, g // block_size)`` alone, and every block of a weight stage holds the same counts.
So how many positions before ``g`` went to each source (``draws_before``: that source's next
example number), and where a source's ``n``-th draw falls (``draw_position``), are sums over
the stages plus one block's order: O(stages x sources + block_size), whatever ``g``. This is
what lets a reader that owns every k-th example of a mix seek each source instead of reading
the whole mixed stream.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from beamtok._src.stream.mixing.mix_plan import MixPlan, block_counts

__all__ = ["BlockOrder", "MixPositions", "positions_of"]

CACHED_BLOCKS = 64


@dataclass(frozen=True)
class BlockOrder:
    """One block: the source at each offset, and how many earlier offsets of the block went
    to that same source (its draw number inside the block)."""

    sources: np.ndarray
    within: np.ndarray


class MixPositions:
    """Where a plan's positions go, computed: per-source draw counts at any position, and the
    position of any draw."""

    def __init__(self, plan: MixPlan) -> None:
        self.plan = plan
        self.block_size = plan.block_size
        self.sources = len(plan.schedule[0][1])
        starts = [start // plan.block_size for start, _ in plan.schedule]
        self._stages = [
            (
                first,
                starts[i + 1] if i + 1 < len(starts) else None,
                np.array(block_counts(ws, plan.block_size), dtype=np.int64),
            )
            for i, (first, (_, ws)) in enumerate(zip(starts, plan.schedule))
        ]
        self._blocks: OrderedDict[int, BlockOrder] = OrderedDict()

    def block(self, block: int) -> BlockOrder:
        """The order of ``block`` (a few recent blocks are kept)."""
        found = self._blocks.get(block)
        if found is not None:
            self._blocks.move_to_end(block)
            return found
        sources = self.plan.block_order(block)
        by_source = np.argsort(sources, kind="stable")
        firsts = np.searchsorted(sources[by_source], np.arange(self.sources))
        within = np.empty(len(sources), dtype=np.int64)
        within[by_source] = np.arange(len(sources)) - firsts[sources[by_source]]
        found = BlockOrder(sources, within)
        self._blocks[block] = found
        if len(self._blocks) > CACHED_BLOCKS:
            self._blocks.popitem(last=False)
        return found

    def counts_before_block(self, block: int) -> np.ndarray:
        """How many positions of the blocks before ``block`` went to each source."""
        total = np.zeros(self.sources, dtype=np.int64)
        for first, end, counts in self._stages:
            if first >= block:
                break
            total += counts * ((block if end is None else min(end, block)) - first)
        return total

    def draws_before(self, position: int) -> np.ndarray:
        """How many positions before ``position`` went to each source: for each source, the
        number of the example its next draw asks for."""
        block, offset = divmod(position, self.block_size)
        total = self.counts_before_block(block)
        if offset:
            total += np.bincount(self.block(block).sources[:offset], minlength=self.sources)
        return total

    def locate(self, position: int) -> tuple[int, int]:
        """The source of ``position`` and which of that source's draws it is."""
        sources, draws = self.locate_all(np.array([position], dtype=np.int64))
        return int(sources[0]), int(draws[0])

    def locate_all(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`locate` for an array of positions: their sources and draw numbers."""
        positions = np.asarray(positions, dtype=np.int64)
        sources = np.empty(len(positions), dtype=np.int64)
        draws = np.empty(len(positions), dtype=np.int64)
        blocks, offsets = np.divmod(positions, self.block_size)
        for block in np.unique(blocks):
            chosen = blocks == block
            order = self.block(int(block))
            here = order.sources[offsets[chosen]]
            sources[chosen] = here
            draws[chosen] = self.counts_before_block(int(block))[here] + order.within[offsets[chosen]]
        return sources, draws

    def draw_position(self, source: int, draw: int) -> int | None:
        """The position of ``source``'s draw number ``draw`` (0-based), or None when the plan
        never draws it that often (its weight is 0 from some stage on)."""
        before = 0
        for first, end, counts in self._stages:
            per_block = int(counts[source])
            blocks = None if end is None else end - first
            here = None if blocks is None else per_block * blocks
            if per_block and (here is None or draw < before + here):
                block, nth = divmod(draw - before, per_block)
                offsets = np.flatnonzero(self.block(first + block).sources == source)
                return (first + block) * self.block_size + int(offsets[nth])
            if here is None:
                return None
            before += here
        return None


@functools.lru_cache(maxsize=16)
def positions_of(plan: MixPlan) -> MixPositions:
    """The positions of ``plan``, shared by every reader of it in the process (an elastic merge
    builds one probe per old reader)."""
    return MixPositions(plan)

"""A mix that never ends, as numbered examples: what lets a mix of mixes seek.

Example ``n`` of a mix that never stops and caps no source is its global position ``n``
(no position is passed over), so its source and that source's example number come in
closed form (:mod:`beamtok._src.stream.mixing.positions`); the example is then the source's own
numbered example. An outer mix split by examples reads an inner mix this way, block by
block, without reading the positions other readers keep.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from beamtok._src.shards.rows import RowBlock, gather_rows
from beamtok._src.stream.mixing.mix_plan import MixPlan, first_leaves
from beamtok._src.stream.mixing.positions import positions_of
from beamtok._src.stream.reading.source_rows import NumberedRows

__all__ = ["MixRows"]


class MixRows(NumberedRows):
    """Example ``n`` of a mix of ``sources`` under ``plan`` (which never stops and caps
    nothing): an endless source with no epochs."""

    def __init__(self, sources: Sequence[NumberedRows], plan: MixPlan) -> None:
        if not plan.never_ends:
            raise ValueError("only a mix that never ends numbers its examples by position")
        self.sources = list(sources)
        self.positions = positions_of(plan)
        self.first_leaf = np.array(first_leaves([s.leaves for s in self.sources]), dtype=np.int64)
        self.leaves = int(self.first_leaf[-1])
        super().__init__(0, None)

    @property
    def total(self) -> int | None:
        return None

    def leaf_of(self, examples: np.ndarray) -> np.ndarray:
        sources, draws = self.positions.locate_all(examples)
        leaves = self.first_leaf[sources]
        for source in np.unique(sources):
            chosen = sources == source
            leaves[chosen] += self.sources[int(source)].leaf_of(draws[chosen])
        return leaves

    def block(self, examples: np.ndarray) -> RowBlock:
        sources, draws = self.positions.locate_all(examples)
        picks: list[tuple[RowBlock, int]] = [None] * len(sources)  # type: ignore[list-item]
        for source in np.unique(sources):
            chosen = np.flatnonzero(sources == source)
            found = self.sources[int(source)].block(draws[chosen])
            for row, at in enumerate(chosen.tolist()):
                picks[at] = (found, row)
        return gather_rows(picks)

    def close(self) -> None:
        for source in self.sources:
            source.close()

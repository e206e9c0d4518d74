"""The order of a dataset's shards in each epoch, and the share of it one reader takes.

Every epoch lists all shards, in index order or permuted by ``(seed, epoch)`` (a new order
each epoch, the same for every reader); readers that split by shards take every
``parts``-th shard of that list from their own ``part``, readers that split by examples take
all of it. Part of the shard source's job, kept apart because its elastic merge needs the
orders of epochs and readers other than its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from beamtok.stream.reader_split import ReaderSplit

__all__ = ["ShardOrder"]


@dataclass(frozen=True)
class ShardOrder:
    """``count`` shards ordered by ``seed`` (None: index order), shared out as ``split`` says."""

    count: int
    seed: int | None
    split: ReaderSplit

    def epoch(self, epoch: int) -> list[int]:
        """All shard indices of ``epoch``, in the order readers share them out."""
        order = np.arange(self.count)
        if self.seed is not None:
            order = np.random.default_rng([self.seed, epoch]).permutation(order)
        return [int(i) for i in order]

    def owned(self, epoch: int) -> list[int]:
        """The shard indices this reader takes in ``epoch``, in order."""
        order = self.epoch(epoch)
        return order[self.split.part :: self.split.parts] if self.split.mode == "shards" else order

"""The order of a dataset's shards in each epoch, and the share of it one reader takes.

Every epoch lists all shards, in index order or permuted by ``(seed, epoch)`` (a new order
each epoch, the same for every reader); readers that split by shards take every
``parts``-th shard of that list from their own ``part``, readers that split by examples take
all of it. Part of the shard source's job, kept apart because its elastic merge needs the
orders of epochs and readers other than its own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from beamtok.stream.ranks.reader_split import ReaderSplit

__all__ = ["ShardOrder"]


@dataclass(frozen=True)
class ShardOrder:
    """``count`` shards ordered by ``seed`` (None: index order), shared out as ``split`` says."""

    count: int
    seed: int | None
    split: ReaderSplit

    def epoch(self, epoch: int) -> list[int]:
        """All shard indices of ``epoch``, in the order readers share them out."""
        return list(_epoch_order(self.count, self.seed, epoch))

    def owned(self, epoch: int) -> list[int]:
        """The shard indices this reader takes in ``epoch``, in order."""
        order = _epoch_order(self.count, self.seed, epoch)
        return list(order[self.split.part :: self.split.parts] if self.split.mode == "shards" else order)


@functools.lru_cache(maxsize=8)
def _epoch_order(count: int, seed: int | None, epoch: int) -> tuple[int, ...]:
    # shared by every reader in the process: a merge of thousands of old readers' states asks
    # for the same few epochs' orders once per state
    order = np.arange(count)
    if seed is not None:
        order = np.random.default_rng([seed, epoch]).permutation(order)
    return tuple(order.tolist())

"""The options of a shard source, the order of a dataset's shards in each epoch, and the
share of it one reader takes.

Every epoch lists all shards, in index order or permuted by ``(seed, epoch)`` (a new order
each epoch, the same for every reader); readers that split by shards take every
``parts``-th shard of that list from their own ``part``, readers that split by examples take
all of it. Part of the shard source's job, kept apart because its elastic merge needs the
orders of epochs and readers other than its own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.base.sizes import MAX_OPEN_SHARDS, MAX_WORKERS, check_ceiling
from beamtok._src.base.validate import check_int, check_optional_int
from beamtok._src.stream.ranks.reader_split import ReaderSplit

__all__ = ["ShardOptions", "ShardOrder"]


@dataclass(frozen=True)
class ShardOptions:
    """How the shard source orders and opens shards: epochs, the shard-order seed, shards
    open at once, and tokenization worker processes (which never change the stream)."""

    epochs: int | None = 1
    shuffle_seed: int | None = None
    interleave: int = 1
    workers: int = 0

    def __post_init__(self) -> None:
        check_optional_int(self.epochs, "epochs", minimum=1)
        check_optional_int(self.shuffle_seed, "seed")
        check_int(self.interleave, "open_shards", minimum=1)
        check_ceiling(self.interleave, "open_shards (interleave)", MAX_OPEN_SHARDS, "shards")
        check_int(self.workers, "workers")
        check_ceiling(self.workers, "workers", MAX_WORKERS, "processes")

    def to_json(self, reader: ReaderSplit) -> dict[str, Any]:
        """The options the stream fingerprint covers, with how readers split the data (the
        rank is stamped on each state on its own, so ranks share one stream fingerprint)."""
        return {
            "epochs": self.epochs,
            "shuffle_seed": self.shuffle_seed,
            "interleave": self.interleave,
            "world_size": reader.world_size,
            "split": reader.mode,
        }


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

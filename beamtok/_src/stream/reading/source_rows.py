"""One dataset's examples by example number, without reading the ones before.

A packed cache read with one open shard gives its examples in a fixed order: each epoch's
shard order (by the shard-order seed), every row of each shard in turn. Row counts come
from the manifest, so example ``k`` is a row number in closed form: epoch ``k // L`` (``L``
rows an epoch), then the shard holding offset ``k % L`` in that epoch's order, then the row.
Exactly what the shard source would hand out as its example ``k`` (a reader that takes all
shards), fetched by random access through a decode pool. A cache's global shuffle is the same
in closed form: example ``k`` is position ``k % rows`` of epoch ``k // rows``'s permutation.
"""

from __future__ import annotations

import abc
import dataclasses
import functools

import numpy as np

from beamtok._src.production.protocol import RowSource
from beamtok._src.shards.rows import RowBlock
from beamtok._src.stream.global_order.order import GlobalOrder
from beamtok._src.stream.reading.shard_order import ShardOrder

__all__ = ["CacheRows", "NumberedRows", "ShuffledRows", "SourceRows"]


class NumberedRows(abc.ABC):
    """A source's examples by example number: ``epoch_length`` examples an epoch, ``epochs``
    epochs (None: forever)."""

    def __init__(self, epoch_length: int, epochs: int | None) -> None:
        self.epoch_length = epoch_length
        self.epochs = epochs

    @property
    def total(self) -> int | None:
        """How many examples the source gives before it ends (None: it repeats forever)."""
        return None if self.epochs is None and self.epoch_length else self.epoch_length * (self.epochs or 0)

    leaves = 1  # the sources (not mixes) it numbers its examples by: see ``leaf_of``

    def leaf_of(self, examples: np.ndarray) -> np.ndarray:
        """Which of its ``leaves`` each of these examples comes from (one source: 0)."""
        return np.zeros(len(examples), dtype=np.int64)

    @abc.abstractmethod
    def block(self, examples: np.ndarray) -> RowBlock:
        """These examples, in the order given, as one block."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the files it read."""


class CacheRows(NumberedRows):
    """Numbered examples that are rows of one cache, read from ``rows`` by global row number."""

    def __init__(self, rows: RowSource, epoch_length: int, epochs: int | None) -> None:
        self.rows = rows
        super().__init__(epoch_length, epochs)

    @abc.abstractmethod
    def global_rows(self, examples: np.ndarray) -> np.ndarray:
        """The cache's global row numbers of these example numbers."""

    def block(self, examples: np.ndarray) -> RowBlock:
        return self.rows.block(self.global_rows(examples))

    def close(self) -> None:
        self.rows.close()


class SourceRows(CacheRows):
    """Example ``k`` of a dataset read by one reader with one open shard, as a cache row."""

    def __init__(self, rows: RowSource, shard_rows: list[int], order: ShardOrder, epochs: int | None) -> None:
        self.shard_rows = np.asarray(shard_rows, dtype=np.int64)
        self.shard_starts = np.concatenate([[0], np.cumsum(self.shard_rows)])  # global row of each shard's first row
        self.order = order
        super().__init__(rows, int(self.shard_rows.sum()), epochs)

    def global_rows(self, examples: np.ndarray) -> np.ndarray:
        epochs, offsets = np.divmod(np.asarray(examples, dtype=np.int64), self.epoch_length)
        out = np.empty(len(offsets), dtype=np.int64)
        for epoch in np.unique(epochs):
            chosen = epochs == epoch
            shards, ends = self._epoch(int(epoch))
            slot = np.searchsorted(ends, offsets[chosen], side="right")
            local = offsets[chosen] - (ends[slot] - self.shard_rows[shards[slot]])
            out[chosen] = self.shard_starts[shards[slot]] + local
        return out

    @functools.lru_cache(maxsize=4)  # noqa: B019 - one per source, a few epochs at a time
    def _epoch(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        shards = np.asarray(self.order.epoch(epoch), dtype=np.int64)
        return shards, np.cumsum(self.shard_rows[shards])


class ShuffledRows(CacheRows):
    """Example ``k`` of a cache's global shuffle read by one reader: row ``k % rows`` of epoch
    ``k // rows``'s permutation (its position, but for the holes of a spread order)."""

    def __init__(self, rows: RowSource, order: GlobalOrder, epochs: int | None) -> None:
        self.order = order  # epoch 0's; other epochs differ by the epoch alone
        self._latest = order  # the epoch read last (a spread order keeps where its holes lie)
        super().__init__(rows, rows.total, epochs)

    def global_rows(self, examples: np.ndarray) -> np.ndarray:
        epochs, numbers = np.divmod(np.asarray(examples, dtype=np.int64), self.epoch_length)
        rows = np.empty(len(numbers), dtype=np.int64)
        for epoch in np.unique(epochs):
            chosen = epochs == epoch
            if self._latest.epoch != epoch:
                self._latest = dataclasses.replace(self.order, epoch=int(epoch))
            order = self._latest
            rows[chosen] = order.rows_at(order.positions_of(numbers[chosen]))  # a spread order's holes passed over
        return rows

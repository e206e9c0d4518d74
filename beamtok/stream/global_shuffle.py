"""global_shuffle(seed, window): every row of a cache once per epoch, in a keyed permutation.

Position ``p`` of epoch ``e`` is global row ``perm_e(p)``, where ``perm_e`` is a Feistel
permutation keyed by ``(seed, e)`` over all rows (``window=None``), or a permutation of
windows of ``window`` consecutive rows followed by a permutation inside each window (keyed by
``(seed, e, window)``): with windows, the rows read close together in time come from a few
row groups, so a small decode cache serves them; without, any row may follow any other.

The permutation is computed, never stored. Readers split the positions, not the shards:
reader ``part`` of ``parts`` takes positions ``part, part + parts, ...``, so the global order
is the same for any number of readers. The state is ``{epoch, position, stats}``: the
reader's count of positions taken, whatever the corpus size. Rows are fetched in batches of
the next positions, each row group decoded once per batch at most.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from beamtok.errors import ConfigError, StateError
from beamtok.shard import DocCounts, Produced, ShardCursor
from beamtok.stream.permutation import FeistelPermutation
from beamtok.stream.source import StreamStats
from beamtok.stream.split import ReaderSplit
from beamtok.stream.state import check_int, check_keys, copy_state
from beamtok.validate import check_int as check_option
from beamtok.validate import check_optional_int

__all__ = ["GlobalOrder", "GlobalShuffleSource", "RowSource"]

FETCH = 256  # positions fetched together


class RowSource(Protocol):
    """Random access to rows by global row number (a packed cache)."""

    total: int

    def rows(self, global_rows: np.ndarray) -> list[tuple[dict[str, Any], DocCounts]]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class GlobalOrder:
    """The permutation of one epoch over ``total`` rows."""

    total: int
    seed: int
    epoch: int
    window: int | None = None

    def __post_init__(self) -> None:
        check_option(self.seed, "seed")
        check_optional_int(self.window, "window", minimum=1)

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """The global rows at these positions of the epoch."""
        if self.window is None or self.window >= self.total:
            return FeistelPermutation(self.total, (self.seed, self.epoch))(positions)
        size = self.window
        windows = math.ceil(self.total / size)
        last = self.total - (windows - 1) * size  # the last window may be shorter
        order = FeistelPermutation(windows, (self.seed, self.epoch))(np.arange(windows))
        sizes = np.where(order == windows - 1, last, size)
        ends = np.cumsum(sizes)
        slots = np.searchsorted(ends, positions, side="right")
        out = np.empty(len(positions), dtype=np.int64)
        for slot in np.unique(slots):
            chosen = slots == slot
            w = int(order[slot])
            offsets = positions[chosen] - (ends[slot] - sizes[slot])
            inner = FeistelPermutation(int(sizes[slot]), (self.seed, self.epoch, w))(offsets)
            out[chosen] = w * size + inner
        return out


class GlobalShuffleSource:
    """Yields a packed cache's rows in a keyed permutation, epoch after epoch."""

    KEYS = ("epoch", "position", "stats")

    def __init__(
        self, rows: RowSource, *, seed: int, window: int | None, epochs: int | None, split: ReaderSplit
    ) -> None:
        if rows.total == 0:
            raise ConfigError("global_shuffle(): the cache holds no rows")
        self.source = rows
        self.seed = seed
        self.window = window
        self.epochs = epochs
        self.part, self.parts = split.part, split.parts
        self.mine = len(range(self.part, rows.total, self.parts))  # positions this reader takes per epoch
        self.reset(None)

    def reset(self, state: dict[str, Any] | None) -> None:
        self.stats = StreamStats()
        self._epoch = 0
        self._position = 0
        self._buffer: list[tuple[dict[str, Any], DocCounts]] = []
        self._buffer_start = 0
        if state is None:
            return
        state = check_keys(copy_state(state), self.KEYS, "global shuffle")
        self._epoch = check_int(state["epoch"], "epoch", "global shuffle")
        if self.epochs is not None and self._epoch >= self.epochs:
            raise StateError(f"global shuffle: epoch {self._epoch} is past the last epoch ({self.epochs})")
        self._position = check_int(state["position"], "position", "global shuffle")
        if self._position > self.mine:
            raise StateError(f"global shuffle: position {self._position} is past this reader's {self.mine} rows")
        self.stats = StreamStats.from_json(state["stats"])

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self._epoch, "position": self._position, "stats": self.stats.to_json()}

    @property
    def epoch(self) -> int:
        return self._epoch

    def stats_json(self) -> dict[str, Any]:
        return {**self.stats.to_json(), "epoch": self._epoch}

    def __iter__(self) -> GlobalShuffleSource:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._position >= self.mine:
            if self.epochs is not None and self._epoch + 1 >= self.epochs:
                raise StopIteration
            self._epoch += 1
            self._position = 0
            self._buffer = []
        index = self._position - self._buffer_start
        if not 0 <= index < len(self._buffer):
            self._fetch()
            index = 0
        example, counts = self._buffer[index]
        self._position += 1
        self.stats.record(Produced(example, ShardCursor(), counts))
        return example

    def _fetch(self) -> None:
        """Read the rows of the next FETCH positions of this reader, in their order."""
        count = min(FETCH, self.mine - self._position)
        positions = self.part + self.parts * np.arange(self._position, self._position + count, dtype=np.int64)
        order = GlobalOrder(self.source.total, self.seed, self._epoch, self.window)
        self._buffer = self.source.rows(order.rows_at(positions))
        self._buffer_start = self._position

    def close(self) -> None:
        self.source.close()

    def state_at(self, example: int) -> dict[str, Any]:
        raise ConfigError("start_example does not apply to a global shuffle; resume from a state_dict")

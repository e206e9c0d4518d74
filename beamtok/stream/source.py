"""ShardSource: the root of every stream.

It orders the shards of each epoch (optionally shuffled with a seed), keeps the ones this
reader owns (by rank and DataLoader worker), keeps ``interleave`` of them open and takes one
example from each in turn. Its state holds the epoch, the position in that epoch's order and
the cursor of each open shard, so restoring seeks instead of replaying.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok.errors import ConfigError, StateError
from beamtok.shard import NO_COUNTS, DocCounts, Produced, ShardCursor
from beamtok.sources.urls import Shard
from beamtok.stream.state import check_int, check_keys, copy_state

__all__ = ["ReaderSplit", "ShardOpener", "ShardSource", "StreamStats"]

ShardOpener = Callable[[Shard, ShardCursor], Iterator[Produced]]
PREFETCH_SHARDS = 4


@dataclass(frozen=True)
class ReaderSplit:
    """Which part of the data this reader owns: rank of world, worker of DataLoader workers.

    ``mode="shards"`` gives each reader whole shards; ``"examples"`` gives it every
    ``parts``-th example of the full stream (for corpora with fewer shards than readers).
    """

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1
    mode: str = "shards"

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ConfigError(f"rank must be in 0..world_size-1, got rank={self.rank} world_size={self.world_size}")
        if self.num_workers < 1 or not 0 <= self.worker < self.num_workers:
            raise ConfigError(f"worker must be in 0..num_workers-1, got {self.worker} of {self.num_workers}")
        if self.mode not in ("shards", "examples"):
            raise ConfigError(f"split mode must be 'shards' or 'examples', got {self.mode!r}")

    @property
    def part(self) -> int:
        return self.rank * self.num_workers + self.worker

    @property
    def parts(self) -> int:
        return self.world_size * self.num_workers

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "worker": self.worker,
            "num_workers": self.num_workers,
            "mode": self.mode,
        }


class StreamStats:
    """Counts of documents and examples that reached the consumer's side of the source."""

    KEYS = ("documents", "examples", "tokens", "pad_tokens")

    def __init__(self) -> None:
        self.documents = DocCounts()
        self.examples = 0
        self.tokens = 0
        self.pad_tokens = 0

    def record(self, produced: Produced) -> None:
        if produced.counts is not NO_COUNTS:
            self.documents.add(produced.counts)
        example = produced.example
        if example is None:
            return
        self.examples += 1
        ids = example.get("input_ids")
        if ids is None:
            return
        segments = example.get("segment_ids")
        real = int(np.count_nonzero(segments)) if segments is not None else len(ids)
        self.tokens += real
        self.pad_tokens += len(ids) - real

    def to_json(self) -> dict[str, Any]:
        return {
            "documents": self.documents.to_json(),
            "examples": self.examples,
            "tokens": self.tokens,
            "pad_tokens": self.pad_tokens,
        }

    @classmethod
    def from_json(cls, state: Any) -> StreamStats:
        check_keys(state, cls.KEYS, "stats")
        stats = cls()
        try:
            stats.documents = DocCounts.from_json(state["documents"])
        except (KeyError, TypeError) as e:
            raise StateError(f"stats: malformed document counts {state['documents']!r}") from e
        stats.examples = check_int(state["examples"], "examples", "stats")
        stats.tokens = check_int(state["tokens"], "tokens", "stats")
        stats.pad_tokens = check_int(state["pad_tokens"], "pad_tokens", "stats")
        return stats


class _Slot:
    __slots__ = ("cursor", "examples", "shard")

    def __init__(self, shard: int, cursor: ShardCursor, examples: Iterator[Produced]) -> None:
        self.shard = shard
        self.cursor = cursor
        self.examples = examples


class ShardSource:
    """Yields the examples of the shards this reader owns, epoch after epoch."""

    KEYS = ("epoch", "position", "slots", "turn", "stats")

    def __init__(
        self,
        shards: list[Shard],
        open_shard: ShardOpener,
        *,
        epochs: int | None = 1,
        shuffle_seed: int | None = None,
        interleave: int = 1,
        split: ReaderSplit = ReaderSplit(),
    ) -> None:
        if not shards:
            raise ConfigError("the dataset has no shards")
        if interleave < 1:
            raise ConfigError(f"interleave must be >= 1, got {interleave}")
        if epochs is not None and epochs < 1:
            raise ConfigError(f"epochs must be >= 1 or None (forever), got {epochs}")
        if split.mode == "shards" and len(shards) < split.parts:
            raise ConfigError(
                f"{len(shards)} shard(s) cannot be split over {split.parts} readers "
                f"(world_size={split.world_size} x workers={split.num_workers}); "
                "use more shards or shard_by_rank(..., split='examples')"
            )
        self.shards = shards
        self.open_shard = open_shard
        self.epochs = epochs
        self.shuffle_seed = shuffle_seed
        self.interleave = interleave
        self.split = split
        self.reset(None)

    def order(self, epoch: int) -> list[int]:
        """Shard indices this reader takes in ``epoch``, in order."""
        order = np.arange(len(self.shards))
        if self.shuffle_seed is not None:
            order = np.random.default_rng([self.shuffle_seed, epoch]).permutation(order)
        if self.split.mode == "shards":
            order = order[self.split.part :: self.split.parts]
        return [int(i) for i in order]

    def reset(self, state: dict[str, Any] | None) -> None:
        self.stats = StreamStats()
        self._epoch = 0
        self._position = 0
        self._slots: list[_Slot] = []
        self._turn = 0
        if state is not None:
            self._restore(copy_state(state))
        self._order = self.order(self._epoch)
        self._hint()

    def _restore(self, state: Any) -> None:
        check_keys(state, self.KEYS, "shard source")
        self._epoch = check_int(state["epoch"], "epoch", "shard source")
        if self.epochs is not None and self._epoch >= self.epochs:
            raise StateError(f"shard source: epoch {self._epoch} is past the last epoch ({self.epochs})")
        n_owned = len(self.order(self._epoch))
        self._position = check_int(state["position"], "position", "shard source")
        if self._position > n_owned:
            raise StateError(f"shard source: position {self._position} is past this reader's {n_owned} shards")
        slots = state["slots"]
        if not isinstance(slots, list) or len(slots) > self.interleave:
            raise StateError(f"shard source: slots must be a list of at most {self.interleave} open shards")
        for slot in slots:
            check_keys(slot, ("shard", "cursor"), "shard source slot")
            index = check_int(slot["shard"], "shard", "shard source slot")
            if index >= len(self.shards):
                raise StateError(f"shard source: shard {index} does not exist (the dataset has {len(self.shards)})")
            cursor = ShardCursor.from_json(slot["cursor"])
            self._slots.append(_Slot(index, cursor, self.open_shard(self.shards[index], cursor)))
        self._turn = check_int(state["turn"], "turn", "shard source")
        if self._slots and self._turn >= len(self._slots):
            raise StateError(f"shard source: turn {self._turn} is out of range")
        self.stats = StreamStats.from_json(state["stats"])

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self._epoch,
            "position": self._position,
            "slots": [{"shard": s.shard, "cursor": s.cursor.to_json()} for s in self._slots],
            "turn": self._turn,
            "stats": self.stats.to_json(),
        }

    def __iter__(self) -> ShardSource:
        return self

    def __next__(self) -> dict[str, Any]:
        while True:
            if not self._slots and not self._fill():
                raise StopIteration
            slot = self._slots[self._turn]
            produced = next(slot.examples, None)
            if produced is None:
                self._replace(self._turn)
                continue
            slot.cursor = produced.cursor
            self.stats.record(produced)
            if produced.example is None:
                continue
            self._turn = (self._turn + 1) % len(self._slots)
            return produced.example

    def _hint(self) -> None:
        """Tell an opener that runs ahead (worker processes) which shards come next."""
        prefetch = getattr(self.open_shard, "prefetch", None)
        if prefetch is not None:
            upcoming = self._order[self._position : self._position + PREFETCH_SHARDS]
            prefetch([(self.shards[i], ShardCursor()) for i in upcoming])

    def close(self) -> None:
        """Stop worker processes, if the opener has any."""
        close = getattr(self.open_shard, "close", None)
        if close is not None:
            close()

    def _open(self) -> _Slot | None:
        if self._position >= len(self._order):
            return None
        index = self._order[self._position]
        self._position += 1
        cursor = ShardCursor()
        return _Slot(index, cursor, self.open_shard(self.shards[index], cursor))

    def _fill(self) -> bool:
        """Open shards into empty slots, moving to the next epoch when this one is spent."""
        while True:
            while len(self._slots) < self.interleave:
                slot = self._open()
                if slot is None:
                    break
                self._slots.append(slot)
            if self._slots:
                self._turn = 0
                self._hint()
                return True
            if self.epochs is not None and self._epoch + 1 >= self.epochs:
                return False
            self._epoch += 1
            self._position = 0
            self._order = self.order(self._epoch)

    def _replace(self, i: int) -> None:
        """A shard ran out: the next shard of the order takes its slot, or the slot closes."""
        slot = self._open()
        if slot is not None:
            self._slots[i] = slot
            self._hint()
            return
        del self._slots[i]
        if self._slots:
            self._turn = i % len(self._slots)

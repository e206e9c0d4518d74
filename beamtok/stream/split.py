"""Which part of the data a reader owns: its rank of the world, its DataLoader worker.

``split="shards"`` gives each reader whole shards (the source keeps every ``parts``-th shard
of the order); ``split="examples"`` gives it every ``parts``-th example of the full stream
(:class:`ExampleSplitNode`), for corpora with fewer shards than readers.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from beamtok.errors import ConfigError, StateError
from beamtok.stream.node import Node, StageNode
from beamtok.stream.state import check_int, check_keys
from beamtok.validate import check_choice

__all__ = ["SPLIT_MODES", "ExampleSplitNode", "ReaderSplit", "dataloader_worker"]

SPLIT_MODES = ("shards", "examples")


@dataclass(frozen=True)
class ReaderSplit:
    """This reader's part: rank of world size, worker of DataLoader workers, and how the data
    is split between readers."""

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1
    mode: str = "shards"

    def __post_init__(self) -> None:
        if not isinstance(self.world_size, int) or self.world_size < 1 or not isinstance(self.rank, int) or not 0 <= self.rank < self.world_size:
            raise ConfigError(f"rank must be in 0..world_size-1, got rank={self.rank!r} world_size={self.world_size!r}")
        if self.num_workers < 1 or not 0 <= self.worker < self.num_workers:
            raise ConfigError(f"worker must be in 0..num_workers-1, got {self.worker} of {self.num_workers}")
        check_choice(self.mode, "split", SPLIT_MODES)

    @property
    def part(self) -> int:
        return self.rank * self.num_workers + self.worker

    @property
    def parts(self) -> int:
        return self.world_size * self.num_workers

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "world_size": self.world_size, "worker": self.worker, "num_workers": self.num_workers, "mode": self.mode}


class ExampleSplitNode(StageNode):
    """Keep every ``parts``-th example starting at ``part`` (reader split by examples).

    After a resume on another world size, ``taken`` lists global example numbers the old
    readers already took beyond the resumed position: they are skipped."""

    KEYS = ("upstream", "seen")
    NAME = "example split"

    def __init__(self, upstream: Node, part: int, parts: int) -> None:
        super().__init__(upstream)
        self.part = part
        self.parts = parts
        self._seen = 0
        self._taken: list[int] = []

    def reset(self, state: dict[str, Any] | None) -> None:
        if state is not None and isinstance(state, dict) and "taken" in state:
            taken = state["taken"]
            if not isinstance(taken, list):
                raise StateError(f"{self.NAME}: taken must be a list of example numbers")
            state = {k: v for k, v in state.items() if k != "taken"}
            super().reset(state)
            self._taken = sorted(check_int(i, "taken", self.NAME) for i in taken)
            return
        super().reset(state)

    def _restore(self, state: dict[str, Any] | None) -> None:
        self._seen = 0 if state is None else check_int(state["seen"], "seen", self.NAME)
        self._taken = []

    def __next__(self) -> Any:
        while True:
            item = next(self.upstream)
            index = self._seen
            self._seen += 1
            while self._taken and self._taken[0] < index:
                self._taken.pop(0)
            if self._taken and self._taken[0] == index:
                continue
            if index % self.parts == self.part:
                return item

    def _position(self) -> dict[str, Any]:
        taken = [i for i in self._taken if i >= self._seen]
        return {"seen": self._seen, "taken": taken} if taken else {"seen": self._seen}

    def merge(self, states: list[dict[str, Any]], olds: list[ReaderSplit], new: ReaderSplit) -> dict[str, Any]:
        from beamtok.stream.elastic import merge_example_splits

        for state in states:
            check_keys(state, (*self.KEYS, "taken") if isinstance(state, dict) and "taken" in state else self.KEYS, self.NAME)
            check_int(state["seen"], "seen", self.NAME)
            if not isinstance(state.get("taken", []), list):
                raise StateError(f"{self.NAME}: taken must be a list of example numbers")
            for i in state.get("taken", []):
                check_int(i, "taken", self.NAME)
        return merge_example_splits(states, olds, new)


def dataloader_worker() -> tuple[int, int]:
    """(worker id, worker count) inside a torch DataLoader worker, else (0, 1)."""
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is None:
        return 0, 1
    info = torch_data.get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)

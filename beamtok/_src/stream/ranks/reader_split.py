"""Which part of the data a reader owns: its rank of the world, its DataLoader worker, and
whether readers share whole shards or every k-th example."""

from __future__ import annotations

from dataclasses import dataclass

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import check_choice
from beamtok._src.stream.state import ReaderSplitJSON

__all__ = ["SPLIT_MODES", "ReaderSplit"]

SPLIT_MODES = ("shards", "examples")


@dataclass(frozen=True)
class ReaderSplit:
    """This reader's part: rank of world size, worker of DataLoader workers, and how the data
    is split between readers.

    Attributes:
        rank: This process's rank, 0 to ``world_size - 1``.
        world_size: How many ranks read the data.
        worker: This DataLoader worker, 0 to ``num_workers - 1``.
        num_workers: DataLoader workers per rank.
        mode: How the data is split between the ``world_size * num_workers`` readers:
            ``shards`` (whole files each) or ``examples`` (one file's examples dealt out too).
    """

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1
    mode: str = "shards"

    def __post_init__(self) -> None:
        if (
            not isinstance(self.world_size, int)
            or self.world_size < 1
            or not isinstance(self.rank, int)
            or not 0 <= self.rank < self.world_size
        ):
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

    def to_json(self) -> ReaderSplitJSON:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "worker": self.worker,
            "num_workers": self.num_workers,
            "mode": self.mode,
        }

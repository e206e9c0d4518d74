"""Configuration of the stream stages, kept as small frozen records.

A Dataset holds these; ``build_stream`` turns them into live nodes. Their JSON form feeds the
stream fingerprint that every state is stamped with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from beamtok.sources.urls import Shard
from beamtok.stream.source import ReaderSplit, ShardOpener, ShardSource
from beamtok.stream.stages import Batch, Enumerate, ExampleSplit, Node, Take, WindowShuffle

__all__ = ["BatchConfig", "EnumerateConfig", "ShuffleConfig", "SourceOptions", "StageConfig", "TakeConfig", "build_stream"]


@dataclass(frozen=True)
class SourceOptions:
    """How the shard source orders and opens shards."""

    epochs: int | None = 1
    shuffle_seed: int | None = None
    interleave: int = 1
    rank: int = 0
    world_size: int = 1
    split: str = "shards"
    workers: int = 0  # tokenization worker processes; never changes the stream

    def to_json(self) -> dict[str, Any]:
        # rank is stamped separately (ReaderSplit), so ranks share one stream fingerprint
        return {
            "epochs": self.epochs,
            "shuffle_seed": self.shuffle_seed,
            "interleave": self.interleave,
            "world_size": self.world_size,
            "split": self.split,
        }


@dataclass(frozen=True)
class ShuffleConfig:
    window: int
    seed: int

    def to_json(self) -> dict[str, Any]:
        return {"stage": "shuffle", "window": self.window, "seed": self.seed}


@dataclass(frozen=True)
class BatchConfig:
    size: int
    drop_last: bool
    tensors: str

    def to_json(self) -> dict[str, Any]:
        return {"stage": "batch", "size": self.size, "drop_last": self.drop_last, "tensors": self.tensors}


@dataclass(frozen=True)
class TakeConfig:
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"stage": "take", "count": self.count}


@dataclass(frozen=True)
class EnumerateConfig:
    start: int

    def to_json(self) -> dict[str, Any]:
        return {"stage": "enumerate", "start": self.start}


StageConfig = ShuffleConfig | BatchConfig | TakeConfig | EnumerateConfig


def build_stream(
    shards: list[Shard],
    open_shard: ShardOpener,
    options: SourceOptions,
    stages: tuple[StageConfig, ...],
    split: ReaderSplit,
    pad_id: int,
) -> tuple[ShardSource, Node]:
    """Wire the source and stages; return the source (for stats) and the last node."""
    source = ShardSource(
        shards,
        open_shard,
        epochs=options.epochs,
        shuffle_seed=options.shuffle_seed,
        interleave=options.interleave,
        split=split,
    )
    node: Node = source
    if split.mode == "examples" and split.parts > 1:
        node = ExampleSplit(node, split.part, split.parts)
    for stage in stages:
        if isinstance(stage, ShuffleConfig):
            node = WindowShuffle(node, stage.window, stage.seed)
        elif isinstance(stage, BatchConfig):
            node = Batch(node, stage.size, drop_last=stage.drop_last, pad_id=pad_id, tensors=stage.tensors)
        elif isinstance(stage, TakeConfig):
            node = Take(node, stage.count)
        else:
            node = Enumerate(node, stage.start)
    return source, node

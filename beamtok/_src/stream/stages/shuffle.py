"""shuffle(window, seed): shuffle examples within consecutive windows, seeded per window."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.base.sizes import MAX_WINDOW, check_ceiling
from beamtok._src.base.validate import check_int as check_option
from beamtok._src.stream.node import Node, Stage, StreamContext
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.stages.window import WindowNode, describe_window_state
from beamtok._src.stream.state import WindowState

__all__ = ["Shuffle", "WindowShuffleNode"]


@dataclass(frozen=True)
class Shuffle(Stage):
    """Shuffle within windows of ``window`` examples; each window (counted over the whole
    stream, so every epoch too) gets its own permutation from ``(seed, window number)``."""

    NAME = "shuffle"
    REREADS_ON_RESUME = True

    window: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_option(self.window, "window", minimum=1)
        check_ceiling(self.window, "shuffle window", MAX_WINDOW, "examples")
        check_option(self.seed, "seed")

    def rows_held(self) -> int:
        return self.window

    def build(self, upstream: Node, context: StreamContext) -> Node:
        return WindowShuffleNode(upstream, self, context.rebuild)

    @classmethod
    def describe_state(cls, state: dict[str, Any]) -> str:
        return describe_window_state(state, "examples")


class WindowShuffleNode(WindowNode[WindowState]):
    """Each window's examples in a permutation keyed by ``(seed, window number)``."""

    NAME = "shuffle"

    def __init__(
        self, upstream: Node, config: Shuffle, rebuild: Callable[[ReaderSplit], tuple[Any, Node]] | None = None
    ) -> None:
        self.config = config
        super().__init__(upstream, config.window, rebuild)

    def arrange(self, items: list[Any], window: int) -> list[Any]:
        perm = np.random.default_rng([self.config.seed, window]).permutation(len(items))
        return [items[i] for i in perm]

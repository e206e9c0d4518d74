"""shuffle(window, seed): shuffle examples within consecutive windows, seeded per window."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok.errors import StateError
from beamtok.stream.node import Node, Stage, StageNode, StreamContext
from beamtok.stream.split import ReaderSplit
from beamtok.stream.state import check_int, check_keys, copy_state
from beamtok.validate import check_int as check_option

__all__ = ["Shuffle", "WindowShuffleNode"]


@dataclass(frozen=True)
class Shuffle(Stage):
    """Shuffle within windows of ``window`` examples; each window (counted over the whole
    stream, so every epoch too) gets its own permutation from ``(seed, window number)``."""

    NAME = "shuffle"

    window: int
    seed: int = 0

    def __post_init__(self) -> None:
        check_option(self.window, "window", minimum=1)
        check_option(self.seed, "seed")

    def build(self, upstream: Node, context: StreamContext) -> Node:
        return WindowShuffleNode(upstream, self)


class WindowShuffleNode(StageNode):
    """The state is the upstream position at the start of the current window plus how many
    of its examples were emitted; restoring re-reads that one window, never more."""

    KEYS = ("upstream", "window", "emitted")
    NAME = "shuffle"

    def __init__(self, upstream: Node, config: Shuffle) -> None:
        super().__init__(upstream)
        self.config = config
        self._restore(None)

    def _restore(self, state: dict[str, Any] | None) -> None:
        self._buffer: list[Any] = []
        self._emitted = 0
        self._window_start: dict[str, Any] | None = None
        self._index = 0
        if state is None:
            return
        self._index = check_int(state["window"], "window", self.NAME)
        emitted = check_int(state["emitted"], "emitted", self.NAME)
        if emitted:
            self._fill()
            if emitted >= len(self._buffer):
                raise StateError(f"shuffle: {emitted} emitted, but the window holds {len(self._buffer)} examples")
            self._emitted = emitted

    def _fill(self) -> None:
        self._window_start = self.upstream.state_dict()
        items = list(itertools.islice(self.upstream, self.config.window))
        perm = np.random.default_rng([self.config.seed, self._index]).permutation(len(items))
        self._buffer = [items[i] for i in perm]
        self._emitted = 0

    def __next__(self) -> Any:
        if self._emitted >= len(self._buffer):
            if self._buffer:
                self._index += 1
            self._fill()
            if not self._buffer:
                raise StopIteration
        item = self._buffer[self._emitted]
        self._emitted += 1
        return item

    def merge(self, states: list[dict[str, Any]], olds: list[ReaderSplit], new: ReaderSplit) -> dict[str, Any]:
        """Between windows only: a window half emitted belongs to its reader."""
        states = [check_keys(copy_state(s), self.KEYS, self.NAME) for s in states]
        busy = [old.part for s, old in zip(states, olds) if s["emitted"] != 0]
        if busy:
            raise StateError(
                f"cannot resume on another world size inside a shuffle window (readers {busy} are part way through "
                f"one; a window belongs to one reader): resume with the old world size ({olds[0].world_size}), or "
                "use global_shuffle() over a cache, whose order is shared by all readers"
            )
        window = next((s["window"] for s, old in zip(states, olds) if old.part == new.part), 0)
        upstream = self.upstream.merge([s["upstream"] for s in states], olds, new)
        return {"upstream": upstream, "window": window, "emitted": 0}

    def state_dict(self) -> dict[str, Any]:
        if self._emitted < len(self._buffer):
            return {"upstream": self._window_start, "window": self._index, "emitted": self._emitted}
        next_index = self._index + 1 if self._buffer else self._index
        return {"upstream": self.upstream.state_dict(), "window": next_index, "emitted": 0}

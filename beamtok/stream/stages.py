"""Stream stages after the shard source: shuffle, batch, take, enumerate, example split.

Each stage is an iterator over its upstream with ``state_dict()`` and ``reset(state)``.
Its state is its own small position plus the upstream's state; it never holds examples.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from beamtok.errors import ConfigError, StateError
from beamtok.stream.collate import collate
from beamtok.stream.state import check_int, check_keys, copy_state

__all__ = ["Batch", "Enumerate", "ExampleSplit", "Node", "Take", "WindowShuffle"]


class Node(Protocol):
    """What every stream stage (and the shard source) provides."""

    def __iter__(self) -> Iterator[Any]: ...

    def __next__(self) -> Any: ...

    def state_dict(self) -> dict[str, Any]: ...

    def reset(self, state: dict[str, Any] | None) -> None: ...


class _Stage(abc.ABC):
    """Common plumbing: an upstream node and strict restore of ``KEYS``."""

    KEYS: tuple[str, ...] = ("upstream",)
    NAME = "stage"

    def __init__(self, upstream: Node) -> None:
        self.upstream = upstream

    def __iter__(self) -> _Stage:
        return self

    @abc.abstractmethod
    def __next__(self) -> Any: ...

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]: ...

    def reset(self, state: dict[str, Any] | None) -> None:
        if state is None:
            self.upstream.reset(None)
            self._restore(None)
            return
        state = check_keys(copy_state(state), self.KEYS, self.NAME)
        self.upstream.reset(state["upstream"])
        self._restore(state)

    def _restore(self, state: dict[str, Any] | None) -> None:  # noqa: B027 - stages without a position keep it
        """Set this stage's own position from ``state`` (None: the start)."""


class WindowShuffle(_Stage):
    """Shuffle within consecutive windows of ``window`` examples, seeded per window.

    The state is the upstream position at the start of the current window plus how many of
    its examples were emitted; restoring re-reads that one window, never more.
    """

    KEYS = ("upstream", "window", "emitted")
    NAME = "shuffle"

    def __init__(self, upstream: Node, window: int, seed: int) -> None:
        if window < 1:
            raise ConfigError(f"shuffle window must be >= 1, got {window}")
        super().__init__(upstream)
        self.window = window
        self.seed = seed
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
        items = list(itertools.islice(self.upstream, self.window))
        perm = np.random.default_rng([self.seed, self._index]).permutation(len(items))
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

    def state_dict(self) -> dict[str, Any]:
        if self._emitted < len(self._buffer):
            return {"upstream": self._window_start, "window": self._index, "emitted": self._emitted}
        next_index = self._index + 1 if self._buffer else self._index
        return {"upstream": self.upstream.state_dict(), "window": next_index, "emitted": 0}


class Batch(_Stage):
    """Group ``size`` examples into one collated batch (numpy, or torch tensors)."""

    NAME = "batch"

    def __init__(self, upstream: Node, size: int, *, drop_last: bool, pad_id: int, tensors: str) -> None:
        if size < 1:
            raise ConfigError(f"batch size must be >= 1, got {size}")
        if tensors not in ("numpy", "torch"):
            raise ConfigError(f"tensors must be 'numpy' or 'torch', got {tensors!r}")
        super().__init__(upstream)
        self.size = size
        self.drop_last = drop_last
        self.pad_id = pad_id
        self.tensors = tensors

    def __next__(self) -> dict[str, Any]:
        examples = list(itertools.islice(self.upstream, self.size))
        if not examples or (self.drop_last and len(examples) < self.size):
            raise StopIteration
        return collate(examples, self.pad_id, self.tensors)

    def state_dict(self) -> dict[str, Any]:
        return {"upstream": self.upstream.state_dict()}


class Take(_Stage):
    """Stop after ``count`` items."""

    KEYS = ("upstream", "taken")
    NAME = "take"

    def __init__(self, upstream: Node, count: int) -> None:
        if count < 0:
            raise ConfigError(f"take count must be >= 0, got {count}")
        super().__init__(upstream)
        self.count = count
        self._taken = 0

    def _restore(self, state: dict[str, Any] | None) -> None:
        self._taken = 0 if state is None else check_int(state["taken"], "taken", self.NAME)
        if self._taken > self.count:
            raise StateError(f"take: {self._taken} taken is more than the limit {self.count}")

    def __next__(self) -> Any:
        if self._taken >= self.count:
            raise StopIteration
        item = next(self.upstream)
        self._taken += 1
        return item

    def state_dict(self) -> dict[str, Any]:
        return {"upstream": self.upstream.state_dict(), "taken": self._taken}


class Enumerate(_Stage):
    """Yield ``(i, item)`` pairs, counting from ``start``."""

    KEYS = ("upstream", "count")
    NAME = "enumerate"

    def __init__(self, upstream: Node, start: int = 0) -> None:
        super().__init__(upstream)
        self.start = start
        self._count = start

    def _restore(self, state: dict[str, Any] | None) -> None:
        self._count = self.start if state is None else check_int(state["count"], "count", self.NAME)

    def __next__(self) -> tuple[int, Any]:
        item = next(self.upstream)
        i = self._count
        self._count += 1
        return i, item

    def state_dict(self) -> dict[str, Any]:
        return {"upstream": self.upstream.state_dict(), "count": self._count}


class ExampleSplit(_Stage):
    """Keep every ``parts``-th example starting at ``part`` (reader split by examples)."""

    KEYS = ("upstream", "seen")
    NAME = "example split"

    def __init__(self, upstream: Node, part: int, parts: int) -> None:
        super().__init__(upstream)
        self.part = part
        self.parts = parts
        self._seen = 0

    def _restore(self, state: dict[str, Any] | None) -> None:
        self._seen = 0 if state is None else check_int(state["seen"], "seen", self.NAME)

    def __next__(self) -> Any:
        while True:
            item = next(self.upstream)
            keep = self._seen % self.parts == self.part
            self._seen += 1
            if keep:
                return item

    def state_dict(self) -> dict[str, Any]:
        return {"upstream": self.upstream.state_dict(), "seen": self._seen}

"""Windowed stages: read the upstream a window at a time and hand out each window rearranged.

The state of such a stage never holds items: it is the upstream position where the current
window began, the window's number and how many of its outputs were handed out. A resume
re-reads one window; a resume on another world size finishes old readers' windows first.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Callable
from typing import Any, TypeVar

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.validate import check_int
from beamtok._src.stream.node import Node, StageNode
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.state import NodeState, WindowState, check_keys, copy_state

__all__ = ["WindowNode", "describe_window_state"]


def describe_window_state(state: dict[str, Any], outputs: str) -> str:
    """A windowed stage's own position in words; ``outputs`` names what it hands out."""
    drain = state.get(WindowNode.DRAIN) or []
    extra = f"; it first finishes {len(drain)} window(s) of readers of another world size" if drain else ""
    return (
        f"window {state.get('window')} (counted over the whole stream), {state.get('emitted')} of its {outputs} delivered; "
        f"a resume re-reads this window from the source position above{extra}"
    )


W = TypeVar("W", bound=WindowState)  # a windowed node's state: the window's, or one that adds to it


class WindowNode(StageNode[W]):
    """A stage that reads its upstream in windows of ``size`` items and hands out each
    window's items rearranged by :meth:`arrange`, a pure function of the items and the window
    number (a shuffle permutes them; a token-budget batcher groups them into batches).

    The state is the upstream position at the start of the current window plus how many of
    its outputs were emitted; restoring re-reads that one window, never more. After a resume
    on another world size, ``drain`` lists old readers' half-emitted windows (their split,
    window start, window number, outputs emitted); this reader re-reads each through the old
    reader's own stream and emits the rest before its own windows."""

    KEYS = ("upstream", "window", "emitted")
    DRAIN = "drain"
    NAME = "window"

    def __init__(
        self, upstream: Node, size: int, rebuild: Callable[[ReaderSplit], tuple[Any, Node]] | None = None
    ) -> None:
        super().__init__(upstream)
        self.size = size
        self.rebuild = rebuild
        self._drain: list[dict[str, Any]] = []
        self._drain_items: list[Any] | None = None
        self._restore(None)

    def reset(self, state: W | None) -> None:
        drain: list[dict[str, Any]] = []
        saved: Any = state
        if isinstance(state, dict) and self.DRAIN in state:
            saved = copy_state(state)
            drain = [self._check_drain(entry) for entry in saved.pop(self.DRAIN) or []]
        super().reset(saved)
        self._drain, self._drain_items = drain, None

    def _check_drain(self, entry: Any) -> dict[str, Any]:
        entry = check_keys(entry, ("split", "upstream", "window", "emitted"), f"{self.NAME} drain")
        try:
            ReaderSplit(**entry["split"])
        except (TypeError, ConfigError) as e:
            raise StateError(f"{self.NAME} drain: malformed split {entry['split']!r}: {e}") from None
        check_int(entry["window"], "window", f"{self.NAME} drain")
        check_int(entry["emitted"], "emitted", f"{self.NAME} drain")
        return entry

    def _restore(self, state: dict[str, Any] | None) -> None:
        self._buffer: list[Any] = []
        self._emitted = 0
        self._window_start: NodeState | None = None
        self._index = 0
        self._resume_at = 0  # examples of the restored window already emitted; it is re-read at the first next()
        if state is None:
            return
        self._index = check_int(state["window"], "window", self.NAME)
        self._resume_at = check_int(state["emitted"], "emitted", self.NAME)
        if self._resume_at:
            self._window_start = state["upstream"]

    def catch_up(self) -> None:
        super().catch_up()
        if self._resume_at:
            self._resume()

    def _resume(self) -> None:
        """Re-read the restored window (deferred to the first ``next()``: nothing is read before)."""
        emitted, self._resume_at = self._resume_at, 0
        self._fill()
        if emitted >= len(self._buffer):
            raise StateError(f"{self.NAME}: {emitted} emitted, but the window holds {len(self._buffer)} outputs")
        self._emitted = emitted

    @abc.abstractmethod
    def arrange(self, items: list[Any], window: int) -> list[Any]:
        """What window number ``window`` of upstream ``items`` hands out, in order."""

    def _fill(self) -> None:
        self._window_start = self.upstream.state_dict()
        items = list(itertools.islice(self.upstream, self.size))
        self._buffer = self.arrange(items, self._index) if items else []
        self._emitted = 0

    def _window_of(self, split: ReaderSplit, upstream: dict[str, Any], window: int) -> tuple[list[Any], NodeState]:
        """Another reader's window read through its own stream: its outputs, and its stream's
        state after the window."""
        if self.rebuild is None:
            raise StateError(f"{self.NAME}: this stream cannot rebuild another reader's window")
        source, node = self.rebuild(split)
        try:
            node.reset(upstream)
            items = list(itertools.islice(node, self.size))
            after = node.state_dict()
        finally:
            source.close()
        return self.arrange(items, window) if items else [], after

    def _next_drained(self) -> tuple[bool, Any]:
        while self._drain:
            entry = self._drain[0]
            if self._drain_items is None:
                self._drain_items, _ = self._window_of(
                    ReaderSplit(**entry["split"]), entry["upstream"], entry["window"]
                )
            if entry["emitted"] < len(self._drain_items):
                entry["emitted"] += 1
                return True, self._drain_items[entry["emitted"] - 1]
            self._drain.pop(0)
            self._drain_items = None
        return False, None

    def __next__(self) -> Any:
        if self._resume_at:
            self._resume()
        if self._drain:
            drained, item = self._next_drained()
            if drained:
                return item
        if self._emitted >= len(self._buffer):
            if self._buffer:
                self._index += 1
            self._fill()
            if not self._buffer:
                raise StopIteration
        item = self._buffer[self._emitted]
        self._emitted += 1
        return item

    def merge(self, states: list[W], olds: list[ReaderSplit], new: ReaderSplit) -> W:
        """Old readers' half-emitted windows (and windows still draining from an earlier
        resume) are dealt round robin to the new readers to finish; the stream below
        continues from where each old window ends (read once here to find that position)."""
        drains: list[dict[str, Any]] = []
        below = []
        for saved, old in zip(states, olds):
            state = copy_state(saved)
            drains.extend(self._check_drain(entry) for entry in state.pop(self.DRAIN, None) or [])
            state = check_keys(state, self.KEYS, self.NAME)
            emitted = check_int(state["emitted"], "emitted", self.NAME)
            if not emitted:
                below.append(state["upstream"])
                continue
            window = check_int(state["window"], "window", self.NAME)
            items, after = self._window_of(old, state["upstream"], window)
            if emitted >= len(items):
                raise StateError(f"{self.NAME}: {emitted} emitted, but the window holds {len(items)} outputs")
            drains.append({"split": old.to_json(), "upstream": state["upstream"], "window": window, "emitted": emitted})
            below.append(after)
        same = next((s for s, old in zip(states, olds) if old.part == new.part), states[0])
        merged: dict[str, Any] = {
            "upstream": self.upstream.merge(below, olds, new),
            "window": same["window"] + (1 if same["emitted"] else 0),
            "emitted": 0,
        }
        mine = [entry for k, entry in enumerate(drains) if k % new.parts == new.part]
        if mine:
            merged[self.DRAIN] = mine
        return merged  # type: ignore[return-value]  # W: a window's keys (a subclass merges its own)

    def state_dict(self) -> W:
        if self._resume_at:  # restored, not read yet
            state = WindowState(upstream=copy_state(self._window_start), window=self._index, emitted=self._resume_at)
        elif self._emitted < len(self._buffer):
            assert self._window_start is not None  # a window is held: _fill kept where it started
            state = WindowState(upstream=self._window_start, window=self._index, emitted=self._emitted)
        else:
            next_index = self._index + 1 if self._buffer else self._index
            state = WindowState(upstream=self.upstream.state_dict(), window=next_index, emitted=0)
        if self._drain:
            state["drain"] = copy_state(self._drain)
        return state  # type: ignore[return-value]  # W: the window's keys, to which a subclass adds its own

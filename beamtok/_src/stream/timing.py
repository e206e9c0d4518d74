"""A live view of where a stream's time goes: each stage's own time and the consumer's stall.

Every node of a live stream is wrapped in a :class:`TimedNode` that adds the wall time of its
``next()`` (and of ``next_rows``, the batch fast path) to a :class:`StageTimer`. A stage's time
includes what it waited for upstream, so its own time is its time minus its upstream's. The
iterator adds the consumer's side: time spent inside ``next()`` (the training loop waiting for
data) against time between calls (the loop's own work). Timing is not part of the state: a
resumed iterator starts counting afresh.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from beamtok._src.stream.node import Node
from beamtok._src.stream.state import NodeState

if TYPE_CHECKING:
    from beamtok._src.shards.spans import Taken
    from beamtok._src.stream.ranks.reader_split import ReaderSplit

__all__ = ["StageTimer", "TimedNode", "Timing", "describe_timing"]


class StageTimer:
    """Seconds spent in one node's ``next()``, including its upstream's, and items returned."""

    __slots__ = ("items", "name", "seconds")

    def __init__(self, name: str) -> None:
        self.name = name
        self.seconds = 0.0
        self.items = 0


class TimedNode(Node[NodeState]):
    """A node that times its ``next()`` and ``next_rows()`` and passes every other declared
    capability of :class:`~beamtok._src.stream.node.Node` to the node it wraps."""

    def __init__(self, node: Node, timer: StageTimer) -> None:
        self._node = node
        self._timer = timer
        self.upstream = node.upstream

    def __next__(self) -> Any:
        start = time.perf_counter()
        try:
            item = next(self._node)
        finally:
            self._timer.seconds += time.perf_counter() - start
        self._timer.items += 1
        return item

    def next_rows(self, limit: int) -> list[Taken] | None:
        start = time.perf_counter()
        try:
            pieces = self._node.next_rows(limit)
        finally:
            self._timer.seconds += time.perf_counter() - start
        if pieces:
            self._timer.items += sum(p.rows for p in pieces)
        return pieces

    def state_dict(self) -> NodeState:
        return self._node.state_dict()

    def reset(self, state: NodeState | None) -> None:
        self._node.reset(state)

    def merge(self, states: list[NodeState], olds: list[ReaderSplit], new: ReaderSplit) -> NodeState:
        return self._node.merge(states, olds, new)

    def can_seek(self) -> bool:
        return self._node.can_seek()

    def seek(self, items: int) -> int:
        return self._node.seek(items)

    def catch_up(self) -> None:
        self._node.catch_up()

    def check_merge(self, olds: list[ReaderSplit]) -> None:
        self._node.check_merge(olds)

    def stage_stats(self) -> dict[str, Any]:
        return self._node.stage_stats()


class Timing:
    """The stage timers of one iterator (source first) and its consumer's side."""

    def __init__(self) -> None:
        self.stages: list[StageTimer] = []
        self.waiting = 0.0  # inside next(): the consumer waited for data
        self.consuming = 0.0  # between next() calls: the consumer's own work
        self.first_item = 0.0  # the first next(), opening files and starting workers
        self._returned_at: float | None = None

    def timed(self, node: Node, name: str) -> TimedNode:
        timer = StageTimer(name)
        self.stages.append(timer)
        return TimedNode(node, timer)

    def entered(self) -> float:
        now = time.perf_counter()
        if self._returned_at is not None:
            self.consuming += now - self._returned_at
        return now

    def left(self, entered: float) -> None:
        now = time.perf_counter()
        if self._returned_at is None:
            self.first_item = now - entered
        else:
            self.waiting += now - entered
        self._returned_at = now

    def to_json(self) -> dict[str, Any]:
        """Each stage's own seconds and share of the time in ``next()``, and the stall: the
        share of the consumer's time since the first item spent waiting in ``next()``."""
        stages = []
        below = 0.0
        inclusive_total = self.stages[-1].seconds if self.stages else 0.0
        for timer in self.stages:
            own = max(0.0, timer.seconds - below)
            below = timer.seconds
            stages.append(
                {
                    "stage": timer.name,
                    "seconds": own,
                    "share": own / inclusive_total if inclusive_total else 0.0,
                    "items": timer.items,
                }
            )
        since_first = self.waiting + self.consuming
        return {
            "stages": stages,
            "first_item_seconds": self.first_item,
            "waiting_seconds": self.waiting,
            "consumer_seconds": self.consuming,
            "stall": self.waiting / since_first if since_first else 0.0,
        }


def describe_timing(timing: dict[str, Any]) -> str:
    """The timing figures as a small table for people."""
    lines = [f"{'stage':<36} {'own s':>9} {'share':>7} {'items':>10}"]
    for stage in timing["stages"]:
        lines.append(f"{stage['stage']:<36} {stage['seconds']:>9.3f} {stage['share']:>7.1%} {stage['items']:>10,}")
    lines.append(
        f"first item {timing['first_item_seconds']:.3f} s; since then the consumer waited {timing['waiting_seconds']:.3f} s "
        f"in next() and worked {timing['consumer_seconds']:.3f} s between calls: stall {timing['stall']:.1%}"
    )
    return "\n".join(lines)

"""enumerate(start): yield ``(i, item)`` pairs, counting from ``start``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from beamtok._src.base.validate import check_int
from beamtok._src.base.validate import check_int as check_option
from beamtok._src.stream.node import Node, Stage, StageNode, StreamContext
from beamtok._src.stream.state import NodeState

__all__ = ["Enumerate", "EnumerateNode"]


@dataclass(frozen=True)
class Enumerate(Stage):
    NAME = "enumerate"

    start: int = 0

    def __post_init__(self) -> None:
        check_option(self.start, "start")

    def build(self, upstream: Node, context: StreamContext) -> Node:
        return EnumerateNode(upstream, self.start)

    @classmethod
    def describe_state(cls, state: dict[str, Any]) -> str:
        return f"the next number is {state.get('count')}"


class EnumerateNode(StageNode[NodeState]):
    KEYS = ("upstream", "count")
    NAME = "enumerate"

    def __init__(self, upstream: Node, start: int) -> None:
        super().__init__(upstream)
        self.start = start
        self._count = start

    def _restore(self, state: dict[str, Any] | None) -> None:
        self._count = self.start if state is None else check_int(state["count"], "count", self.NAME)

    def can_seek(self) -> bool:
        return self.upstream.can_seek()

    def seek(self, items: int) -> int:
        passed: int = self.upstream.seek(items)
        self._count += passed
        return passed

    def __next__(self) -> tuple[int, Any]:
        item = next(self.upstream)
        i = self._count
        self._count += 1
        return i, item

    def _position(self) -> dict[str, Any]:
        return {"count": self._count}

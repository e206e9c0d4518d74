"""take(count): stop after ``count`` items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from beamtok._src.base.errors import StateError
from beamtok._src.base.validate import check_int
from beamtok._src.base.validate import check_int as check_option
from beamtok._src.stream.node import Node, Stage, StageNode, StreamContext
from beamtok._src.stream.state import NodeState

__all__ = ["Take", "TakeNode"]


@dataclass(frozen=True)
class Take(Stage):
    NAME = "take"

    count: int

    def __post_init__(self) -> None:
        check_option(self.count, "count")

    def build(self, upstream: Node, context: StreamContext) -> Node:
        return TakeNode(upstream, self.count)

    @classmethod
    def describe_state(cls, state: dict[str, Any]) -> str:
        return f"{state.get('taken')} items taken"


class TakeNode(StageNode[NodeState]):
    KEYS = ("upstream", "taken")
    NAME = "take"

    def __init__(self, upstream: Node, count: int) -> None:
        super().__init__(upstream)
        self.count = count
        self._taken = 0

    def _restore(self, state: dict[str, Any] | None) -> None:
        self._taken = 0 if state is None else check_int(state["taken"], "taken", self.NAME)
        if self._taken > self.count:
            raise StateError(f"take: {self._taken} taken is more than the limit {self.count}")

    def can_seek(self) -> bool:
        return self.upstream.can_seek()

    def seek(self, items: int) -> int:
        passed: int = self.upstream.seek(min(items, self.count - self._taken))
        self._taken += passed
        return passed

    def __next__(self) -> Any:
        if self._taken >= self.count:
            raise StopIteration
        item = next(self.upstream)
        self._taken += 1
        return item

    def _position(self) -> dict[str, Any]:
        return {"taken": self._taken}

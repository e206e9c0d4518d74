"""``split="examples"``: a reader keeps every ``parts``-th example of the full stream
(:class:`ExampleSplitNode`), for corpora with fewer shards than readers. (With
``split="shards"`` the shard source keeps every ``parts``-th shard of the order instead.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beamtok._src.base.errors import StateError
from beamtok._src.base.validate import check_int
from beamtok._src.stream.node import Node, StageNode
from beamtok._src.stream.ranks.equal_counts import fresh_pad
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.state import NodeState, check_keys

__all__ = ["ExampleSplitNode"]


class ExampleSplitNode(StageNode[NodeState]):
    """Keep every ``parts``-th example starting at ``part`` (reader split by examples).

    After a resume on another world size, ``taken`` lists global example numbers the old
    readers already took beyond the resumed position: they are skipped."""

    KEYS = ("upstream", "seen")
    NAME = "example split"

    def __init__(self, upstream: Node, part: int, parts: int) -> None:
        super().__init__(upstream)
        self.part = part
        self.parts = parts
        self.even: str | None = None  # "drop" or "pad": see beamtok._src.stream.ranks.equal_counts
        self.pad: dict[str, Any] | None = None
        self._seen = 0
        self._taken: list[int] = []
        self._padded = False

    @classmethod
    def describe_state(cls, state: Any) -> str:
        """A saved example split's own position in words."""
        if not isinstance(state, dict):
            return f"example split: unreadable ({state!r})"
        taken = state.get("taken") or []
        extra = f"; {len(taken)} later example(s) taken by readers of another world size are skipped" if taken else ""
        return f"example split: {state.get('seen')} examples of the whole stream seen (this reader keeps every k-th){extra}"

    def reset(self, state: NodeState | None) -> None:
        padded = isinstance(state, dict) and state.get("padded") is True
        if isinstance(state, dict) and "padded" in state:
            state = {k: v for k, v in state.items() if k != "padded"}
        self._reset(state)
        self._padded = padded

    def _reset(self, state: NodeState | None) -> None:
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
        if self._padded:
            raise StopIteration
        if self.upstream.can_seek():
            return self._next_by_seeking()
        while True:
            try:
                item = next(self.upstream)
            except StopIteration:
                return self._end()
            index = self._seen
            self._seen += 1
            while self._taken and self._taken[0] < index:
                self._taken.pop(0)
            if self._taken and self._taken[0] == index:
                continue
            if index % self.parts == self.part:
                if self.even == "drop" and not self._round_complete(index):
                    raise StopIteration  # not every reader gets an example of this last round
                return item

    def _next_by_seeking(self) -> Any:
        """The next example this reader keeps, passing the others' without reading them."""
        while self._taken and self._taken[0] < self._seen:
            self._taken.pop(0)
        index = _first_owned_at_or_after(self._seen, self.part, self.parts)
        while self._taken and self._taken[0] <= index:  # taken by old readers: the next owned one
            if self._taken.pop(0) == index:
                index += self.parts
        passed = self.upstream.seek(index - self._seen)
        self._seen += passed
        if self._seen < index:
            return self._end()
        try:
            item = next(self.upstream)
        except StopIteration:
            return self._end()
        self._seen += 1
        if self.even == "drop" and not self._round_complete(index):
            raise StopIteration
        return item

    def _round_complete(self, index: int) -> bool:
        """Read ahead (other readers' examples) to the end of ``index``'s round: whether it exists."""
        last = (index // self.parts + 1) * self.parts - 1
        if self.upstream.can_seek():
            wanted = last + 1 - self._seen
            passed = self.upstream.seek(wanted) if wanted > 0 else 0
            self._seen += passed
            return passed == max(wanted, 0)
        while self._seen <= last:
            try:
                next(self.upstream)
            except StopIteration:
                return False
            self._seen += 1
        return True

    def _end(self) -> Any:
        """The stream ended after ``_seen`` examples: with even='pad', a reader whose share of the
        last round is missing gets one padding row, so every reader has ceil(seen / parts)."""
        if (
            self.even == "pad"
            and self.pad is not None
            and self._seen % self.parts
            and self.part >= self._seen % self.parts
        ):
            self._padded = True
            return fresh_pad(self.pad)
        raise StopIteration

    def _position(self) -> dict[str, Any]:
        taken = [i for i in self._taken if i >= self._seen]
        position: dict[str, Any] = {"seen": self._seen, "taken": taken} if taken else {"seen": self._seen}
        if self._padded:
            position["padded"] = True
        return position

    def merge(self, states: list[NodeState], olds: list[ReaderSplit], new: ReaderSplit) -> NodeState:
        states = [{k: v for k, v in s.items() if k != "padded"} if isinstance(s, dict) else s for s in states]
        for state in states:
            check_keys(
                state, (*self.KEYS, "taken") if isinstance(state, dict) and "taken" in state else self.KEYS, self.NAME
            )
            check_int(state["seen"], "seen", self.NAME)
            if not isinstance(state.get("taken", []), list):
                raise StateError(f"{self.NAME}: taken must be a list of example numbers")
            for i in state.get("taken", []):
                check_int(i, "taken", self.NAME)
        return merge_example_splits(states, olds, new)


def merge_example_splits(states: Sequence[NodeState], olds: list[ReaderSplit], new: ReaderSplit) -> dict[str, Any]:
    """The example-split state for reader ``new`` from the old readers' example-split states
    (``{"upstream", "seen", "taken"?}``): a base reader's upstream, and what was taken beyond it."""
    parts = olds[0].parts
    taken_before = sorted({int(i) for s in states for i in s.get("taken", [])})
    taken_set = set(taken_before)
    nexts = []
    for state, old in zip(states, olds):
        i = _first_owned_at_or_after(state["seen"], old.part, parts)
        while i in taken_set:
            i += parts
        nexts.append(i)
    first_unread = min(nexts)
    base = max((s for s in states if s["seen"] <= first_unread), key=lambda s: s["seen"])
    start = base["seen"]
    taken = {i for i in taken_before if i >= start}
    for state, old in zip(states, olds):
        i = _first_owned_at_or_after(start, old.part, parts)
        while i < state["seen"]:
            if i not in taken_set:
                taken.add(i)
            i += parts
    merged = {"upstream": base["upstream"], "seen": start}
    if taken:
        merged["taken"] = sorted(taken)
    return merged


def _first_owned_at_or_after(index: int, part: int, parts: int) -> int:
    return index + (part - index) % parts

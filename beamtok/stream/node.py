"""What every stream stage is made of: a frozen configuration and a live node.

A stage's configuration (a :class:`Stage`) checks its options when it is made, writes its
JSON form from its own fields (that form feeds the stream fingerprint every state carries),
and builds its live node over an upstream node. The live node (a :class:`StageNode`) is an
iterator with ``state_dict()`` and ``reset(state)``: its state is its own small position plus
the upstream's state, never examples. A new stage is one module holding both parts plus one
fluent method on ``Dataset`` (docs/architecture.md shows the steps).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from beamtok.errors import StateError
from beamtok.stream.state import check_keys, copy_state

if TYPE_CHECKING:
    from beamtok.stream.reader_split import ReaderSplit  # a type only: the split module builds on this one

__all__ = ["Node", "Stage", "StageNode", "StreamContext"]


class Node(Protocol):
    """What every live stage (and the shard source) provides."""

    def __iter__(self) -> Iterator[Any]: ...

    def __next__(self) -> Any: ...

    def state_dict(self) -> dict[str, Any]: ...

    def reset(self, state: dict[str, Any] | None) -> None: ...

    def merge(self, states: list[dict[str, Any]], olds: list[ReaderSplit], new: ReaderSplit) -> dict[str, Any]:
        """This reader's state from the states of every reader of another split."""
        ...


@dataclass(frozen=True)
class StreamContext:
    """What stages may need to know about the data they run on. ``rebuild(split)`` builds,
    for another reader's split, the stream below this stage: ``(root source, last node)``
    (a shuffle uses it to finish old readers' windows after a resume on another world size)."""

    pad_id: int
    rebuild: Callable[[ReaderSplit], tuple[Any, Node]] | None = None


@dataclass(frozen=True)
class Stage(abc.ABC):
    """A stream stage's configuration."""

    NAME: ClassVar[str]
    # options a resume may change: the stage holds no position that depends on them (a batch's size)
    FREE_ON_RESUME: ClassVar[tuple[str, ...]] = ()
    # a resume re-reads the items this stage held (a shuffle's window): what comes before it must not change
    REREADS_ON_RESUME: ClassVar[bool] = False

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.NAME, **dataclasses.asdict(self)}

    @abc.abstractmethod
    def build(self, upstream: Node, context: StreamContext) -> Node:
        """The live node of this stage over ``upstream``."""

    def rows_held(self) -> int:
        """How many examples the live stage holds at once (a batch, a shuffle window)."""
        return 0

    @classmethod
    def describe_state(cls, state: dict[str, Any]) -> str:
        """This stage's own position in a saved state (``state`` holds it beside ``upstream``)."""
        own = {k: v for k, v in state.items() if k != "upstream"} if isinstance(state, dict) else state
        return f"position {own}" if own else "no position of its own"

    @classmethod
    def named(cls, name: str) -> type[Stage] | None:
        """The stage whose ``NAME`` is ``name`` (every stage module imported so far)."""
        pending = list(cls.__subclasses__())
        while pending:
            kind = pending.pop()
            if getattr(kind, "NAME", None) == name:
                return kind
            pending.extend(kind.__subclasses__())
        return None


class StageNode(abc.ABC):
    """Common plumbing of live stages: an upstream node and strict restore of ``KEYS``."""

    KEYS: tuple[str, ...] = ("upstream",)
    NAME = "stage"

    def __init__(self, upstream: Node) -> None:
        self.upstream = upstream

    def __iter__(self) -> StageNode:
        return self

    @abc.abstractmethod
    def __next__(self) -> Any: ...

    def state_dict(self) -> dict[str, Any]:
        return {"upstream": self.upstream.state_dict(), **self._position()}

    def _position(self) -> dict[str, Any]:
        """This stage's own position (the keys of KEYS but ``upstream``)."""
        return {}

    def reset(self, state: dict[str, Any] | None) -> None:
        if state is None:
            self.upstream.reset(None)
            self._restore(None)
            return
        state = check_keys(copy_state(state), self.KEYS, self.NAME)
        self.upstream.reset(state["upstream"])
        self._restore(state)

    def can_seek(self) -> bool:
        """Whether :meth:`seek` can pass items without reading them: a stage says so only
        when it knows how many upstream items each of its items takes."""
        return False

    def seek(self, items: int) -> int:
        """Pass the next ``items`` items without reading (only when ``can_seek()``); returns
        how many were passed (fewer at the end)."""
        raise NotImplementedError(f"{self.NAME}() cannot pass items without reading them")

    def catch_up(self) -> None:
        """Do the reading a restore deferred to the first ``next()`` (a shuffle's window), here
        and below, so the source's stats count it (``stats()`` asks before any ``next()``)."""
        below = getattr(self.upstream, "catch_up", None)
        if below is not None:
            below()

    def check_merge(self, olds: list[ReaderSplit]) -> None:
        """Refuse, before anything is read, a resume on another world size through a stage whose
        position belongs to one reader; then ask the stages below."""
        if self.KEYS != ("upstream",) and type(self).merge is StageNode.merge:
            raise StateError(
                f"cannot resume on another world size through {self.NAME}(): its position belongs to one reader; "
                f"resume with the old world size ({olds[0].world_size}) or move {self.NAME}() where every reader can restart it"
            )
        below = getattr(self.upstream, "check_merge", None)
        if below is not None:
            below(olds)

    def merge(self, states: list[dict[str, Any]], olds: list[ReaderSplit], new: ReaderSplit) -> dict[str, Any]:
        """A stage without a position of its own passes the merge upstream; others refuse
        unless they override this."""
        self.check_merge(olds)
        states = [check_keys(copy_state(s), self.KEYS, self.NAME) for s in states]
        return {"upstream": self.upstream.merge([s["upstream"] for s in states], olds, new)}

    def _restore(self, state: dict[str, Any] | None) -> None:  # noqa: B027 - stages without a position keep it
        """Set this stage's own position from ``state`` (None: the start)."""

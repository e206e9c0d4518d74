"""What every stream stage is made of: a frozen configuration and a live node.

A stage's configuration (a :class:`Stage`) checks its options when it is made, writes its
JSON form from its own fields (that form feeds the stream fingerprint every state carries),
and builds its live node over an upstream node. The live node (a :class:`StageNode`) is an
iterator with ``state_dict()`` and ``reset(state)``: its state is its own small position plus
the upstream's state, never examples. A node is generic over its state (``Node[ShardSourceState]``,
``StageNode[WindowState]``...): the typed form ``state_dict`` writes is the one ``reset`` and
``merge`` read, so a type checker holds both sides to the same keys. A new stage is one module holding both parts plus one
fluent method on ``Dataset`` (docs/architecture.md shows the steps).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.stream.state import NodeState, check_keys, copy_state

if TYPE_CHECKING:
    from beamtok._src.shards.spans import Taken
    from beamtok._src.stream.ranks.reader_split import ReaderSplit  # a type only: the split module builds on this one

__all__ = ["Node", "RootSource", "S", "Stage", "StageNode", "StreamContext"]

S = TypeVar("S", bound=NodeState)
"""A node's state: the typed form its ``state_dict`` writes and its ``reset`` reads."""


class Node(abc.ABC, Generic[S]):
    """A live node of a stream: an iterator with a JSON state. What a node can do beyond that
    is declared here, each capability a method with the default of a node that cannot: the
    stages above, the iterator and the timing wrapper call these methods, never look for them."""

    upstream: Node[Any] | None = None  # the node this one reads (None: a root source)

    def __iter__(self) -> Iterator[Any]:
        return self

    @abc.abstractmethod
    def __next__(self) -> Any: ...

    @abc.abstractmethod
    def state_dict(self) -> S:
        """Where this node and those below it are, as JSON."""

    @abc.abstractmethod
    def reset(self, state: S | None) -> None:
        """Start again from a state this node's ``state_dict`` gave, or from the beginning.

        Args:
            state: The saved state, or None for the beginning.
        """

    @abc.abstractmethod
    def merge(self, states: list[S], olds: list[ReaderSplit], new: ReaderSplit) -> S:
        """This reader's state from the states of every reader of another split.

        Args:
            states: Every old reader's state of this node, in the order of ``olds``.
            olds: The old readers' splits.
            new: This reader's split.
        """

    def can_seek(self) -> bool:
        """Whether :meth:`seek` can pass items without reading them."""
        return False

    def seek(self, items: int) -> int:
        """Pass items without reading them (only when ``can_seek()``).

        Args:
            items: How many to pass.

        Returns:
            How many were passed (fewer at the end).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot pass items without reading them")

    def next_rows(self, limit: int) -> list[Taken] | None:
        """Up to ``limit`` next rows as decoded column blocks (an empty list at the end), for a
        batch to stack without a dict per example; None: this node gives examples one by one.

        Args:
            limit: The most rows to return.
        """
        return None

    def catch_up(self) -> None:
        """Do the reading a restore deferred to the first ``next()`` (a shuffle's window), here
        and below, so the source's stats count it (``stats()`` asks before any ``next()``)."""
        return None

    def check_merge(self, olds: list[ReaderSplit]) -> None:
        """Refuse, before anything is read, a resume on another world size this node cannot
        take (here and below).

        Args:
            olds: The splits of the readers whose states are merged.

        Raises:
            StateError: This node cannot take the change.
        """
        return None

    def stage_stats(self) -> dict[str, Any]:
        """Figures this node keeps of its own, merged into ``stats()`` (a balanced split's imbalance)."""
        return {}


class RootSource(Node[S]):
    """The node a stream starts from (shards, a mix, a global shuffle): it also keeps the
    source's counts, closes what it opened, and tells the state at an example number."""

    @abc.abstractmethod
    def stats_json(self) -> dict[str, Any]:
        """What the source has read: documents, examples, tokens, epochs (per source in a mix)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop workers and close files now."""

    @abc.abstractmethod
    def state_at(self, example: int) -> S:
        """The state of this source after its first ``example`` examples."""

    def set_weights(self, weights: list[float]) -> int:
        """New mixture weights from the next block no reader has passed (a mix only).

        Args:
            weights: One weight per source, in the mix's order.

        Returns:
            The global position the new weights apply from.
        """
        raise ConfigError("set_weights() applies to a mix (Dataset.mix); this stream has one source")


@dataclass(frozen=True)
class StreamContext:
    """What stages may need to know about the data they run on.

    Attributes:
        pad_id: The id padding positions hold.
        rebuild: Builds, for another reader's split, the stream below this stage as
            ``(root source, last node)`` (a shuffle uses it to finish old readers' windows
            after a resume on another world size); None where it cannot.
    """

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
        """The live node of this stage.

        Args:
            upstream: The node it reads.
            context: What the stage may need to know about the data.
        """

    def rows_held(self) -> int:
        """How many examples the live stage holds at once (a batch, a shuffle window)."""
        return 0

    @classmethod
    def describe_state(cls, state: dict[str, Any]) -> str:
        """This stage's own position in a saved state, in words.

        Args:
            state: The stage's saved state (its position beside ``upstream``).
        """
        own = {k: v for k, v in state.items() if k != "upstream"} if isinstance(state, dict) else state
        return f"position {own}" if own else "no position of its own"


class StageNode(Node[S]):
    """Common plumbing of live stages: an upstream node and strict restore of ``KEYS``.

    Args:
        upstream: The node this stage reads.
    """

    KEYS: tuple[str, ...] = ("upstream",)
    NAME = "stage"

    def __init__(self, upstream: Node[Any]) -> None:
        self.upstream: Node[Any] = upstream

    def state_dict(self) -> S:
        return {"upstream": self.upstream.state_dict(), **self._position()}  # type: ignore[return-value]  # S: these keys

    def _position(self) -> dict[str, Any]:
        """This stage's own position (the keys of KEYS but ``upstream``)."""
        return {}

    def reset(self, state: S | None) -> None:
        if state is None:
            self.upstream.reset(None)
            self._restore(None)
            return
        checked = check_keys(copy_state(state), self.KEYS, self.NAME)
        self.upstream.reset(checked["upstream"])
        self._restore(checked)

    # can_seek() stays False unless a stage knows how many upstream items each of its items takes

    def catch_up(self) -> None:
        self.upstream.catch_up()

    def check_merge(self, olds: list[ReaderSplit]) -> None:
        """Refuse, before anything is read, a resume on another world size through a stage whose
        position belongs to one reader; then ask the stages below.

        Args:
            olds: The splits of the readers whose states are merged.
        """
        if self.KEYS != ("upstream",) and type(self).merge is StageNode.merge:
            raise StateError(
                f"cannot resume on another world size through {self.NAME}(): its position belongs to one reader; "
                f"resume with the old world size ({olds[0].world_size}) or move {self.NAME}() where every reader can restart it"
            )
        self.upstream.check_merge(olds)

    def merge(self, states: list[S], olds: list[ReaderSplit], new: ReaderSplit) -> S:
        """A stage without a position of its own passes the merge upstream; others refuse
        unless they override this.

        Args:
            states: Every old reader's state of this node, in the order of ``olds``.
            olds: The old readers' splits.
            new: This reader's split.
        """
        self.check_merge(olds)
        checked = [
            check_keys(s, self.KEYS, self.NAME) for s in states
        ]  # read, never changed: the merged state is copied when restored
        merged = {"upstream": self.upstream.merge([s["upstream"] for s in checked], olds, new)}
        return merged  # type: ignore[return-value]  # a stage that merges has no keys beside upstream

    def _restore(self, state: dict[str, Any] | None) -> None:
        """Set this stage's own position from ``state`` (None: the start)."""

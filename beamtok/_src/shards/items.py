"""What flows out of a shard's processing: the cursor where the next example starts, the
document counts, a packed example with its cursor (``Produced``) and a document ready to pack
(``DocItem``). Shared by the shard processing, the packers and the backends."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from beamtok._src.base.errors import StateError

__all__ = [
    "END_OF_SHARD",
    "NO_COUNTS",
    "DocCounts",
    "DocItem",
    "Produced",
    "ShardCursor",
    "check_token_offset",
    "with_training_fields",
]

END_OF_SHARD = 1 << 62  # a DocItem whose counts are due only when the shard ends


@dataclass(frozen=True)
class ShardCursor:
    """Where the next example of a shard starts: its index, doc cursor and token offset.

    Attributes:
        index: The shard's number.
        doc: The document cursor (a byte, line or row, as the format counts).
        token: The token offset into that document.
        done: Whether the shard is finished.
    """

    index: int = 0
    doc: int = 0
    token: int = 0
    done: bool = False

    KEYS = ("index", "doc", "token", "done")

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "doc": self.doc, "token": self.token, "done": self.done}

    @classmethod
    def from_json(cls, state: Any) -> ShardCursor:
        """From its JSON form.

        Args:
            state: What ``to_json()`` returned.
        Returns:
            The cursor.
        Raises:
            StateError: The state is malformed.
        """
        if not isinstance(state, dict) or set(state) != set(cls.KEYS):
            raise StateError(f"shard cursor must have exactly the keys {cls.KEYS}, got {state!r}")
        ints = [state[k] for k in ("index", "doc", "token")]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
            raise StateError(f"shard cursor positions must be non-negative integers, got {state!r}")
        if not isinstance(state["done"], bool):
            raise StateError(f"shard cursor 'done' must be a boolean, got {state['done']!r}")
        return cls(state["index"], state["doc"], state["token"], state["done"])


_NO_SKIPS: Mapping[str, int] = MappingProxyType({})


def _add_skips(a: Mapping[str, int], b: Mapping[str, int]) -> Mapping[str, int]:
    if not b:
        return a
    if not a:
        return b
    return Counter(a) + Counter(b)


@dataclass(frozen=True)
class DocCounts:
    """What happened to documents: read = emitted + sum(skipped). Immutable; add with ``+``.

    Attributes:
        read: Documents read.
        emitted: Documents that became examples.
        skipped: Documents skipped, by reason.
        truncated_tokens: Tokens cut off by truncation.
        dropped_tokens: Tokens dropped (a remainder row dropped, a piece too short).
        truncated_docs: Documents truncated.
    """

    read: int = 0
    emitted: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    truncated_tokens: int = 0
    dropped_tokens: int = 0
    truncated_docs: int = 0

    def __post_init__(self) -> None:
        if self.skipped is not _NO_SKIPS:
            frozen = (
                MappingProxyType({k: v for k, v in sorted(self.skipped.items()) if v}) if self.skipped else _NO_SKIPS
            )
            object.__setattr__(self, "skipped", frozen)

    def __add__(self, other: DocCounts) -> DocCounts:
        if not other:
            return self
        if not self:
            return other
        return DocCounts(
            self.read + other.read,
            self.emitted + other.emitted,
            _add_skips(self.skipped, other.skipped),
            self.truncated_tokens + other.truncated_tokens,
            self.dropped_tokens + other.dropped_tokens,
            self.truncated_docs + other.truncated_docs,
        )

    def __bool__(self) -> bool:
        return bool(self.read or self.truncated_tokens or self.dropped_tokens)

    def __reduce__(self) -> tuple[Any, ...]:  # a mapping proxy does not pickle; its dict does
        fields = (
            self.read,
            self.emitted,
            dict(self.skipped),
            self.truncated_tokens,
            self.dropped_tokens,
            self.truncated_docs,
        )
        return (DocCounts, fields)

    def skip_emitted(self, reason: str) -> DocCounts:
        """These counts with one emitted document moved to ``skipped[reason]``.

        Args:
            reason: Why (a skip reason).
        Returns:
            These counts with one emitted example counted as skipped.
        """
        return replace(
            self, emitted=self.emitted - 1, skipped={**self.skipped, reason: self.skipped.get(reason, 0) + 1}
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "emitted": self.emitted,
            "skipped": dict(self.skipped),
            "truncated_tokens": self.truncated_tokens,
            "dropped_tokens": self.dropped_tokens,
            "truncated_docs": self.truncated_docs,
        }

    @classmethod
    def from_json(cls, state: dict[str, Any]) -> DocCounts:
        """From its JSON form.

        Args:
            state: What ``to_json()`` returned.
        Returns:
            The counts.
        Raises:
            StateError: The state is malformed.
        """
        return cls(
            state["read"],
            state["emitted"],
            dict(state["skipped"]),
            state["truncated_tokens"],
            state["dropped_tokens"],
            state["truncated_docs"],
        )


NO_COUNTS = DocCounts()


class Produced(NamedTuple):
    """One output of a shard run.

    ``counts`` are the documents finished since the previous output (those before the doc
    cursor of ``cursor``). ``example`` is None only in the single output of a shard that
    yields no example at all, which still reports its counts.
    """

    example: dict[str, Any] | None
    cursor: ShardCursor
    counts: DocCounts


class DocItem(NamedTuple):
    """A document ready to pack: its doc cursor, its tokens (or record; None if skipped), its
    counts, and the last doc cursor those counts cover (``END_OF_SHARD``: the rest of the
    shard). The counts are reported with the first example that starts past ``through``."""

    cursor: int
    value: Any
    counts: DocCounts
    through: int


def check_token_offset(shard_index: int, start: ShardCursor, first: DocItem) -> None:
    """A cursor inside a document must name the first document read and a token in it."""
    if first.cursor != start.doc or start.token >= len(first.value):
        raise StateError(
            f"shard {shard_index}: the cursor's token offset {start.token} in document {start.doc} does not exist "
            f"(the first document here is {first.cursor}, {len(first.value)} tokens); the state does not match this data"
        )


def with_training_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Add ``labels`` (-100 where the loss mask is 0) and ``attention_mask`` (1 on real tokens)."""
    labels = np.where(fields["loss_mask"] == 1, fields["input_ids"], np.int32(-100)).astype(np.int32)
    attention = (fields["segment_ids"] > 0).astype(np.int8)
    out = dict(fields)
    out.update(labels=labels, attention_mask=attention)
    return out

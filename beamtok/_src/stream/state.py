"""The saved state's parts, typed, and the helpers that keep them strict: exact keys, JSON
types, copies not references.

A state is JSON: the iterator's (:class:`IteratorState`) holds its nodes' under ``pipeline``,
each stage's over its ``upstream`` and the root source's at the bottom: a shard source's
(:class:`ShardSourceState`), a mix's (:class:`MixState`, or :class:`SeekingMixState` where its
sources are read by row number) or a global shuffle's (:class:`GlobalShuffleState`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from beamtok._src.base.errors import StateError

__all__ = [
    "BalancedState",
    "DeliveredJSON",
    "GlobalShuffleState",
    "IteratorState",
    "MixState",
    "NodeState",
    "PlanJSON",
    "ReaderSplitJSON",
    "SeekingMixState",
    "ShardSlotJSON",
    "ShardSourceState",
    "StatsJSON",
    "WindowState",
    "check_keys",
    "copy_state",
    "find_states",
]

NodeState = Mapping[str, Any]
"""Any node's state: one of the typed parts below, or a stage's own keys over its ``upstream``."""


class StatsJSON(TypedDict):
    """What a source has handed out (``StreamStats.to_json``): its documents' counts, and
    examples, real and pad tokens."""

    documents: dict[str, Any]
    examples: int
    tokens: int
    pad_tokens: int


class ShardSlotJSON(TypedDict):
    """An open shard of a shard source: its index and the cursor in it (``ShardCursor.to_json``)."""

    shard: int
    cursor: dict[str, Any]


class _ShardSourceKeys(TypedDict):
    epoch: int
    position: int
    slots: list[ShardSlotJSON]
    turn: int
    stats: StatsJSON


class ShardSourceState(_ShardSourceKeys, total=False):
    """A shard source's state: the epoch, how many of its shards of the epoch's order it has
    opened, the open ones (``slots``) and whose turn it is, what it handed out; after a
    resume on another world size, the shards to finish first (``carry``)."""

    carry: list[ShardSlotJSON]


class _MixKeys(TypedDict):
    kind: Literal["mix"]
    index: int
    sources: list[NodeState]
    stopped: bool


class MixState(_MixKeys, total=False):
    """A mix read source by source: this reader's next position, each source's state,
    whether a source ran out; the counts handed out carried over from a state of the
    seeking form (``stats``) and the weights set while training (``weight_changes``,
    ``[start, weights]`` pairs)."""

    stats: StatsJSON
    weight_changes: list[list[Any]]


class _SeekingMixKeys(TypedDict):
    kind: Literal["seeking_mix"]
    index: int
    positions: list[int]
    stopped: bool
    stats: StatsJSON


class SeekingMixState(_SeekingMixKeys, total=False):
    """A mix whose sources are read by row number: this reader's next position, each
    source's draws before it, whether it stopped, what it handed out; weights set while
    training (``weight_changes``)."""

    weight_changes: list[list[Any]]


class _GlobalShuffleKeys(TypedDict):
    epoch: int
    position: int
    stats: StatsJSON


class GlobalShuffleState(_GlobalShuffleKeys, total=False):
    """A global shuffle's state: the epoch, the next position of this reader's order, what it
    handed out; positions past it already taken out of order (``taken``)."""

    taken: list[int]


class _WindowKeys(TypedDict):
    upstream: NodeState
    window: int
    emitted: int


class WindowState(_WindowKeys, total=False):
    """A windowed stage's state (shuffle, pack): the upstream's state at the window's start,
    the window's number and how many of its items were handed out; old readers' windows
    still to finish after a resume on another world size (``drain``)."""

    drain: list[Any]


class BalancedState(WindowState, total=False):
    """A balanced split's state: a window's, and its figures of the imbalance so far
    (``balance``: global batches, the largest rank's cost dealt and split plainly, the
    total cost, rows dropped)."""

    balance: list[int]


class ReaderSplitJSON(TypedDict):
    """A reader's part of the data (``ReaderSplit.to_json``)."""

    rank: int
    world_size: int
    worker: int
    num_workers: int
    mode: str


class PlanJSON(TypedDict, total=False):
    """A stream's plan (``beamtok._src.stream.stream_plan``): its version, the root's kind, options and
    packing (a mix's sources as runs of plans), ``even``, and every stage's options.
    ``from_about`` marks a plan a migration read from a state saved before plans."""

    version: int
    root: dict[str, Any]
    even: str | None
    stages: list[dict[str, Any]]
    from_about: bool


class DeliveredJSON(TypedDict):
    """What an iterator has returned: items, examples, real and pad tokens."""

    items: int
    examples: int
    tokens: int
    pad_tokens: int


class _IteratorStateKeys(TypedDict):
    beamtok_state: int
    spec: str
    stream: str
    split: ReaderSplitJSON
    pipeline: NodeState
    plan: PlanJSON


class IteratorState(_IteratorStateKeys, total=False):
    """A saved position (``DatasetIterator.state_dict()``), version 2: the format version, the
    spec and stream fingerprints, the reader's split, the nodes' positions (``pipeline``, each
    stage's state over its ``upstream``), the plan; and, for people and statistics, ``about``,
    ``delivered`` and the ranges ``skip()`` passed over; and ``stream_by_location``, the stream
    fingerprint with files named by where they are, so a state crosses between spellings of
    the same files."""

    about: dict[str, Any]
    delivered: DeliveredJSON
    skipped: list[list[int]]
    stream_by_location: str  # the stream fingerprint with local files named by absolute path


def copy_state(state: Any) -> Any:
    """A copy made through JSON, so restoring never mutates (or keeps a reference to) the
    caller's dict, and a state holding anything but JSON values (whose copying could run
    code) is refused.

    Args:
        state: A state or a part of one.

    Raises:
        StateError: It holds something that is not JSON (or NaN).
    """
    try:
        return json.loads(json.dumps(state, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise StateError(f"a state must hold only JSON values: {e}") from None


def check_keys(state: Any, keys: tuple[str, ...] | type, stage: str) -> dict[str, Any]:
    """A node's state, checked to be a JSON object with exactly the node's keys.

    Args:
        state: The node's part of a saved state.
        keys: The keys it must have and no others, or the state's TypedDict: its required
            keys must all be there, its optional ones may be, and no other.
        stage: The node's name, for the message.

    Raises:
        StateError: Not an object, or a key missing or unknown (named, with the stage).
    """
    if not isinstance(state, dict):
        raise StateError(f"{stage}: state must be a JSON object, got {type(state).__name__}")
    typed: Any = keys  # a TypedDict class: mypy types it as a plain type
    required = set(keys) if isinstance(keys, tuple) else set(typed.__required_keys__)
    allowed = required if isinstance(keys, tuple) else required | set(typed.__optional_keys__)
    unknown = sorted(set(state) - allowed)
    missing = sorted(required - set(state))
    if unknown or missing:
        problems = ([f"lacks keys {missing}"] if missing else []) + (
            [f"has keys it does not know {unknown}"] if unknown else []
        )
        raise StateError(
            f"{stage}: the state {' and '.join(problems)} (a state of another beamtok version, or edited by hand?)"
        )
    return state


def find_states(data: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every beamtok state inside ``data`` (an object with a ``beamtok_state`` key, not looked
    into), with where it was found (``$`` is the top): alone, in lists of readers' states, or
    inside a checkpoint (a ``StatefulDataLoader``'s, a Trainer's ``trainer_state.json``).

    Args:
        data: Decoded JSON, or any nesting of dicts, lists and tuples.
        path: Where ``data`` itself sits, for the paths returned.

    Returns:
        ``(path, state)`` pairs in the order found, depth first.
    """
    if isinstance(data, dict) and "beamtok_state" in data:
        return [(path or "$", data)]
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            found += find_states(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            found += find_states(value, f"{path}[{i}]")
    return found

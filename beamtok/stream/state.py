"""Helpers that keep stage states strict: exact keys, JSON types, copies not references."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from beamtok.base.errors import StateError

__all__ = ["DeliveredJSON", "IteratorState", "PlanJSON", "ReaderSplitJSON", "check_keys", "copy_state"]


class ReaderSplitJSON(TypedDict):
    """A reader's part of the data (``ReaderSplit.to_json``)."""

    rank: int
    world_size: int
    worker: int
    num_workers: int
    mode: str


class PlanJSON(TypedDict, total=False):
    """A stream's plan (``beamtok.stream.plan``): its version, the root's kind, options and
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
    pipeline: dict[str, Any]
    plan: PlanJSON


class IteratorState(_IteratorStateKeys, total=False):
    """A saved position (``DatasetIterator.state_dict()``), version 2: the format version, the
    spec and stream fingerprints, the reader's split, the nodes' positions (``pipeline``, each
    stage's state over its ``upstream``), the plan; and, for people and statistics, ``about``,
    ``delivered`` and the ranges ``skip()`` passed over."""

    about: dict[str, Any]
    delivered: DeliveredJSON
    skipped: list[list[int]]


def copy_state(state: Any) -> Any:
    """A copy made through JSON, so restoring never mutates (or keeps a reference to) the
    caller's dict, and a state holding anything but JSON values (whose copying could run
    code) is refused."""
    try:
        return json.loads(json.dumps(state, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise StateError(f"a state must hold only JSON values: {e}") from None


def check_keys(state: Any, keys: tuple[str, ...], stage: str) -> dict[str, Any]:
    """Return ``state`` if it is a dict with exactly ``keys``; raise a StateError naming the stage."""
    if not isinstance(state, dict):
        raise StateError(f"{stage}: state must be a JSON object, got {type(state).__name__}")
    unknown = sorted(set(state) - set(keys))
    missing = sorted(set(keys) - set(state))
    if unknown or missing:
        problems = ([f"lacks keys {missing}"] if missing else []) + (
            [f"has keys it does not know {unknown}"] if unknown else []
        )
        raise StateError(
            f"{stage}: the state {' and '.join(problems)} (a state of another beamtok version, or edited by hand?)"
        )
    return state

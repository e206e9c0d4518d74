"""States of earlier versions, turned into states of this one in one place.

A state names its format in ``beamtok_state``. Version 3 (this beamtok's) always holds the
stream's plan (``beamtok._src.stream.stream_plan``), version 2 of it, and each node state that
more than one node reads says its kind (a mix's: ``"mix"`` read source by source, or
``"seeking_mix"`` read by row number), so no node tells states apart by their keys. Version 2
was the same without the kinds: :func:`migrate` names them, the one place that reads a mix's
kind from its keys. Version 1 held a plan only once plans were added, and a version-1 plan
kept a mix's sources as a list rather than runs of equal plans; it becomes a version-2 state
first. A state saved before plans is read from its ``about`` (the parts it names for people,
short values kept whole): a plan made so is marked ``from_about``, and a stage whose options
were kept only as a hash is marked ``unkept``.
"""

from __future__ import annotations

from typing import Any

from beamtok._src.base.errors import StateError
from beamtok._src.stream.stream_plan import OPTION_NAMES, PLAN_VERSION, source_runs

__all__ = ["STATE_VERSION", "migrate"]

STATE_VERSION = 3
"""The format version of the states this beamtok saves (versions 1 and 2 load through a migration)."""
READABLE_VERSIONS = (1, 2, STATE_VERSION)


def migrate(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` as a state of the current version: itself when it is one, a state of version 1
    or 2 turned into one (a new dict: the caller's is never changed), StateError for any other
    version. A state without the version key is returned as it is, for the caller to refuse."""
    version = state.get("beamtok_state")
    if version == STATE_VERSION or "beamtok_state" not in state:
        return state
    if version not in READABLE_VERSIONS:
        raise StateError(
            f"state format version {version!r} is not supported (this beamtok reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))})"
        )
    if version == 1:
        state = _version_2_of(state)
    return {**state, "beamtok_state": STATE_VERSION, "pipeline": _kinds_named(state.get("pipeline"))}


def _kinds_named(node: Any) -> Any:
    """A version-2 node state (and those nested in it) with each mix's kind named: a mix read
    source by source held its sources' states, one read by row number its sources' positions."""
    if isinstance(node, list):
        return [_kinds_named(item) for item in node]
    if not isinstance(node, dict):
        return node
    named = {key: _kinds_named(value) if key in ("upstream", "sources") else value for key, value in node.items()}
    if "index" in node and "kind" not in node:
        if "sources" in node:
            named["kind"] = "mix"
        elif "positions" in node:
            named["kind"] = "seeking_mix"
    return named


def _version_2_of(state: dict[str, Any]) -> dict[str, Any]:
    """A version-1 state as the version-2 state it would have been."""
    plan = state.get("plan")
    if plan is None:
        about = state.get("about")
        if not isinstance(about, dict):
            raise StateError("a version-1 state with neither a plan nor an about: its pipeline cannot be known")
        plan = _plan_from_about(about)
    elif isinstance(plan, dict) and plan.get("version") == 1:  # a mix's sources were a list of plans
        root = plan.get("root")
        if isinstance(root, dict) and isinstance(root.get("sources"), list):
            root = {**root, "sources": source_runs(root["sources"])}
        plan = {**plan, "version": PLAN_VERSION, "root": root}
    return {**state, "beamtok_state": 2, "plan": plan}


_ROOT_OPTION_LABELS = {label: key for key, label in OPTION_NAMES.items()}


def _plan_from_about(about: dict[str, Any]) -> dict[str, Any]:
    def kept(name: str) -> Any:
        value = about.get(name)
        return value[0] if isinstance(value, list) and len(value) == 1 else None

    if "global_shuffle" in about:
        kind = "global shuffle"
    elif "mix" in about:
        kind = "mix"
    else:
        kind = "shard source"
    options = {
        _ROOT_OPTION_LABELS.get(label, label): kept(label)
        for label in ("epochs", "shuffle_shards seed", "open shards (interleave)", "rank split", "global_shuffle")
        if label in about
    }
    stages: list[tuple[int, dict[str, Any]]] = []
    for label, value in about.items():
        if label.startswith("stage ") and label.endswith(")") and " (" in label:
            number, name = label[len("stage ") : -1].split(" (", 1)
            if number.isdigit():
                config = (
                    value[0] if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict) else None
                )
                stages.append(
                    (int(number), {"stage": name, **(config or {}), **({} if config is not None else {"unkept": True})})
                )
    packing = {label: kept(label) for label in about if label == "packing" or label.endswith(" packing")}
    root: dict[str, Any] = {"kind": kind, "options": options, "packing": packing.get("packing")}
    if kind == "mix":
        root["sources"] = source_runs(
            [
                {"kind": "shard source", "packing": packing.get(f"mix source {i} packing")}
                for i in range(sum(1 for label in packing if label.startswith("mix source ")))
            ]
        )
    return {
        "version": PLAN_VERSION,
        "root": root,
        "even": kept("even"),
        "stages": [config for _, config in sorted(stages, key=lambda pair: pair[0])],
        "from_about": True,
    }

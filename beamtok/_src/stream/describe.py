"""What a state was saved by, part by part, so a refused resume names what changed.

A state carries the stream and spec fingerprints; a mismatch alone says only that something
differs. Beside them the state keeps each part those fingerprints cover: the stream options
and stages in its plan (``beamtok._src.stream.stream_plan``), whole; the root's data in ``about`` (the mix
plan, the shard list, the input format, each per-document step, the packing, the error policy),
short parts as their values, long ones as a short hash (a shard list with its count and its
first and last URL, so a refusal names both lists). Comparing them with the current parts names what changed, old
and new, e.g. ``packing: seq_len 1024 → 2048`` or ``stage 1 (shuffle): seed 0 → 1``.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from beamtok._src.stream.stream_plan import plan_parts

if TYPE_CHECKING:
    from beamtok._src.stream.pipeline import Pipeline

__all__ = ["changes", "describe"]

SHOWN = 4  # changed parts listed in one message
KEPT_CHARS = 160  # parts whose JSON is at most this long are kept as values, longer ones as hashes


def describe(pipeline: Pipeline) -> dict[str, Any]:
    """What a state keeps of each part of the root's data (the plan holds the options and
    stages): a short value itself (``[value]``), so a refusal can say what it was, or a short
    hash of a long one (a shard list)."""
    return {name: _kept(value) for name, value in pipeline.root.content_parts().items()}


def _kept(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True)
    if len(text) <= KEPT_CHARS:
        return [json.loads(text)]
    if _is_shard_list(value):  # its ends, to name both lists in a refusal
        return {"count": value["count"], "first": value["urls"][0], "last": value["urls"][-1], "hash": _hash(value)}
    return _hash(value)


def _is_shard_list(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("urls"), list) and bool(value["urls"])


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:6]


def _same(saved: Any, value: Any) -> bool:
    if isinstance(saved, list) and len(saved) == 1:
        return json.dumps(saved[0], sort_keys=True) == json.dumps(value, sort_keys=True)
    if isinstance(saved, dict) and "hash" in saved:
        return bool(saved["hash"] == _hash(value))
    return bool(saved == _hash(value))


def changes(saved: Any, pipeline: Pipeline, plan: dict[str, Any] | None = None) -> str:
    """The parts of ``pipeline`` that differ from ``saved`` (``old → new`` where the state kept
    the old value, else the current value), or ''. A state's ``plan`` holds each stage's
    options whole, so a stage is compared from it however long its JSON."""
    if not isinstance(saved, dict):
        return ""
    if plan is not None and not plan.get("from_about"):
        saved = {**saved, **{name: [value] for name, value in plan_parts(plan).items()}}
    current = pipeline.parts()
    lines = []
    for name, value in current.items():
        if name not in saved:
            lines.append(f"{name} added (now {_show(value)})")
        elif not _same(saved[name], value):
            old = saved[name]
            if isinstance(old, list) and len(old) == 1:
                lines.append(f"{name}: {_difference(old[0], value)}")
            elif isinstance(old, dict) and "first" in old and _is_shard_list(value):
                lines.append(
                    f"{name}: {_ends(old['count'], old['first'], old['last'])} → {_ends(value['count'], value['urls'][0], value['urls'][-1])}"
                )
            else:
                lines.append(f"{name} (now {_show(value)})")
    for name in saved:
        if name not in current:
            old = saved[name]
            lines.append(
                f"{name} removed (was {_show(old[0])})"
                if isinstance(old, list) and len(old) == 1
                else f"{name} removed"
            )
    if not lines:
        return ""
    shown = "; ".join(lines[:SHOWN]) + (f"; and {len(lines) - SHOWN} more" if len(lines) > SHOWN else "")
    return f"changed since the state was saved: {shown}"


def _ends(count: int, first: str, last: str) -> str:
    return f"{count} shards, {first}" + (f" ... {last}" if count > 1 else "")


def _difference(old: Any, new: Any) -> str:
    """``key old → new`` for each differing key of two dicts, else ``old → new``."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = [k for k in {**old, **new} if old.get(k, _ABSENT) != new.get(k, _ABSENT)]
        return ", ".join(f"{k} {_show(old.get(k, _ABSENT))} → {_show(new.get(k, _ABSENT))}" for k in keys)
    return f"{_show(old)} → {_show(new)}"


class _Absent:
    def __repr__(self) -> str:
        return "absent"


_ABSENT: Any = _Absent()


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "absent"
    if _is_shard_list(value):
        return _ends(value["count"], value["urls"][0], value["urls"][-1])
    if isinstance(value, dict):
        text = ", ".join(f"{k}={_show(v)}" for k, v in value.items())
    else:
        text = json.dumps(value)
    return text if len(text) <= 120 else text[:117] + "..."

"""What a state was saved by, part by part, so a refused resume names what changed.

A state carries the stream and spec fingerprints; a mismatch alone says only that something
differs. Beside them the state keeps a short hash of each part those fingerprints cover (each
stream option, each stream stage, the mix plan, the shard list, the input format, each
per-shard step, the packing, the error policy): a few hundred bytes. Comparing the saved
hashes with the current ones names the parts that changed, shown with their current values,
e.g. ``stage 2 (batch) (now size=16, drop_last=False, tensors=numpy)``.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from beamtok.stream.dataset import Dataset

__all__ = ["changes", "describe", "parts"]

SHOWN = 4  # changed parts listed in one message
OPTION_NAMES = {"shuffle_seed": "shuffle_shards seed", "interleave": "open shards (interleave)", "split": "rank split"}


def parts(dataset: Dataset) -> dict[str, Any]:
    """Each part of a dataset's stream (not the reader's rank or world size), by name."""
    p = dataset._plan
    out: dict[str, Any] = {}
    for key, value in p.options.to_json().items():
        if key != "world_size":  # the reader's split is checked on its own
            out[OPTION_NAMES.get(key, key)] = value
    for i, stage in enumerate(p.stages):
        out[f"stage {i + 1} ({stage.NAME})"] = {k: v for k, v in stage.to_json().items() if k != "stage"}
    if p.mix is not None:
        out["mix"] = p.mix.plan.to_json()
        for i, source in enumerate(p.mix.sources):
            out.update(_source_parts(source, f"mix source {i} "))
            out[f"mix source {i} options"] = source._plan.options.to_json()
    else:
        out.update(_source_parts(dataset, ""))
    return out


def _source_parts(dataset: Dataset, prefix: str) -> dict[str, Any]:
    p = dataset._plan
    spec = p.spec.to_json()
    out: dict[str, Any] = {f"{prefix}shard list": {"count": len(p.shards), "urls": [s.url for s in p.shards]}}
    out[f"{prefix}input format"] = spec["source"]
    for i, step in enumerate(spec["steps"]):
        out[f"{prefix}step {i + 1} ({step.get('op', '?')})"] = {k: v for k, v in step.items() if k != "op"}
    out[f"{prefix}steps"] = [step.get("op") for step in spec["steps"]]
    out[f"{prefix}packing"] = spec["pack"]
    out[f"{prefix}on_error"] = spec["on_error"]
    return out


def describe(dataset: Dataset) -> dict[str, str]:
    """A short hash of each part (what a state keeps)."""
    return {name: _hash(value) for name, value in parts(dataset).items()}


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:6]


def changes(saved: Any, dataset: Dataset) -> str:
    """The parts of ``dataset`` whose hash differs from ``saved``, with current values, or ''."""
    if not isinstance(saved, dict):
        return ""
    current = parts(dataset)
    named = [name for name, value in current.items() if saved.get(name) != _hash(value)]
    gone = [name for name in saved if name not in current]
    lines = [f"{name} (now {_show(current[name])})" for name in named]
    lines += [f"{name} (now absent)" for name in gone]
    if not lines:
        return ""
    shown = "; ".join(lines[:SHOWN]) + (f"; and {len(lines) - SHOWN} more" if len(lines) > SHOWN else "")
    return f"changed since the state was saved: {shown}"


def _show(value: Any) -> str:
    if isinstance(value, dict) and "urls" in value:
        return f"{value['count']} shards, {value['urls'][0]}{' ...' if value['count'] > 1 else ''}"
    if isinstance(value, dict):
        text = ", ".join(f"{k}={_show(v)}" for k, v in value.items())
    else:
        text = json.dumps(value)
    return text if len(text) <= 120 else text[:117] + "..."

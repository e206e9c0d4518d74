"""A saved state in words: which reader saved it, where each stage and each open shard stands.

Every node describes its own part of a state (each stage's ``describe_state``: its own
position in one line; each kind of root's ``state_lines``: its source, in lines), so a new stage cannot be mis-described. Given the pipeline a state belongs to, its
stages and root are known, shards are named by file and cursors by what they count there
(byte offset of uncompressed JSONL, line of compressed JSONL, row of Parquet and Arrow).
Without it, the stages and the kind of root are read from the plan the state keeps. States are found wherever they sit in a JSON file: alone, as a list of readers'
states, or inside a checkpoint (a StatefulDataLoader's or a Trainer's ``trainer_state.json``).
"""

from __future__ import annotations

import json
from typing import Any

from beamtok._src.base.errors import StateError
from beamtok._src.stream.kinds import root_of_kind, stage_named
from beamtok._src.stream.node import Stage
from beamtok._src.stream.pipeline import Pipeline, peel_even, state_split
from beamtok._src.stream.state_migration import STATE_VERSION, migrate
from beamtok._src.stream.stream_plan import mix_source_plans, plan_of, stage_configs
from beamtok._src.transforms.packing_modes import PACKING_MODES
from beamtok._src.transforms.packing_names import packing_words

__all__ = ["explain_state"]


def explain_state(state: dict[str, Any], pipeline: Pipeline | None = None) -> list[str]:
    """Lines describing ``state``; with ``pipeline`` (the one it belongs to), shards are
    named by file and cursors by what they count there."""
    saved = state.get("beamtok_state")
    try:
        state = migrate(state)
        plan: dict[str, Any] | None = plan_of(state)
    except StateError:  # described as far as it can be: without a plan, its pipeline as saved
        plan = None
    read_as = f" (read as version {STATE_VERSION})" if saved != STATE_VERSION else ""
    lines = [f"beamtok state format {saved}{read_as}, spec {state.get('spec')}, stream {state.get('stream')}"]
    split = state.get("split")
    if isinstance(split, dict):
        lines.append(
            f"reader: rank {split.get('rank')} of {split.get('world_size')}, DataLoader worker {split.get('worker')} "
            f"of {split.get('num_workers')}, data split by {split.get('mode')}"
        )
    lines += _packing(plan)
    skipped = state.get("skipped")
    if isinstance(skipped, list) and skipped:
        ranges = ", ".join(f"{r[0]:,}-{r[0] + r[1] - 1:,}" for r in skipped if isinstance(r, list) and len(r) == 2)
        total = sum(r[1] for r in skipped if isinstance(r, list) and len(r) == 2 and isinstance(r[1], int))
        lines.append(f"skipped with skip(): items {ranges} ({total:,} in all; counted in no stats)")
    if pipeline is not None:
        return lines + pipeline.explain(state)
    return lines + _declared(state, plan)


def _packing(plan: dict[str, Any] | None) -> list[str]:
    """How the rows were packed, from the state's plan (a mix: one line per source)."""
    if plan is None:
        return []
    root = plan["root"]
    packings = [("", root.get("packing"))]
    sources = mix_source_plans(root)
    if sources:
        packings = [(f" (mix source {i})", source.get("packing")) for i, source in enumerate(sources)]
    lines = []
    for where, pack in packings:
        if isinstance(pack, dict) and pack.get("mode"):
            mode = PACKING_MODES.get(str(pack["mode"]))
            cursor = mode.cursor_words() if mode is not None else None
            lines.append(f"packing{where}: {packing_words(pack)}" + (f"; {cursor}" if cursor else ""))
    return lines


def _declared(state: dict[str, Any], plan: dict[str, Any] | None) -> list[str]:
    """The pipeline part of a state described from its plan, without the pipeline."""
    stages = stage_configs(plan)
    node = state.get("pipeline")
    chain = []
    for _ in stages:
        if not isinstance(node, dict) or "upstream" not in node:
            break
        chain.append(node)
        node = node["upstream"]
    root = root_of_kind(plan["root"].get("kind")) if plan is not None else None
    if root is None or len(chain) != len(stages):
        return [f"pipeline (its parts were not saved with the state): {json.dumps(state.get('pipeline'))[:400]}"]
    assert plan is not None
    node, even = peel_even(node, plan.get("even") is not None)
    lines = root.state_lines(node, state_split(state), None, plan=plan["root"]) + even
    for i, ((name, _), own) in enumerate(zip(stages, reversed(chain))):
        stage = stage_named(name)
        lines.append(
            f"stage {i + 1} ({name}): {stage.describe_state(own) if stage is not None else Stage.describe_state(own)}"
        )
    return lines

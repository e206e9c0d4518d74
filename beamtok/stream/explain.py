"""A saved state in words: which reader saved it, where each stage and each open shard stands.

Every node describes its own part of a state (``describe_state`` of each stage and each kind
of root), so a new stage cannot be mis-described. Given the pipeline a state belongs to, its
stages and root are known, shards are named by file and cursors by what they count there
(byte offset of uncompressed JSONL, line of compressed JSONL, row of Parquet and Arrow).
Without it, the stages and the kind of root are read from the parts the state keeps
(``about``). States are found wherever they sit in a JSON file: alone, as a list of readers'
states, or inside a checkpoint (a StatefulDataLoader's or a Trainer's ``trainer_state.json``).
"""

from __future__ import annotations

import json
from typing import Any

# The facade imports every stage and root it offers, so Stage.named and root_plan_named know them.
import beamtok.stream.dataset  # noqa: F401
from beamtok.stream.node import Stage
from beamtok.stream.pipeline import Pipeline, peel_even, state_split
from beamtok.stream.roots.base import root_plan_named
from beamtok.transforms.packing_modes import PACKING_MODES, packing_words

__all__ = ["explain_state", "find_states"]


def find_states(data: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every beamtok state inside ``data``, with where it was found (``$`` is the top)."""
    if isinstance(data, dict) and "beamtok_state" in data:
        return [(path or "$", data)]
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            found += find_states(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += find_states(value, f"{path}[{i}]")
    return found


def explain_state(state: dict[str, Any], pipeline: Pipeline | None = None) -> list[str]:
    """Lines describing ``state``; with ``pipeline`` (the one it belongs to), shards are
    named by file and cursors by what they count there."""
    lines = [f"beamtok state format {state.get('beamtok_state')}, spec {state.get('spec')}, stream {state.get('stream')}"]
    split = state.get("split")
    if isinstance(split, dict):
        lines.append(
            f"reader: rank {split.get('rank')} of {split.get('world_size')}, DataLoader worker {split.get('worker')} "
            f"of {split.get('num_workers')}, data split by {split.get('mode')}"
        )
    lines += _packing(state.get("about"))
    skipped = state.get("skipped")
    if isinstance(skipped, list) and skipped:
        ranges = ", ".join(f"{r[0]:,}-{r[0] + r[1] - 1:,}" for r in skipped if isinstance(r, list) and len(r) == 2)
        total = sum(r[1] for r in skipped if isinstance(r, list) and len(r) == 2 and isinstance(r[1], int))
        lines.append(f"skipped with skip(): items {ranges} ({total:,} in all; counted in no stats)")
    if pipeline is not None:
        return lines + pipeline.explain(state)
    return lines + _declared(state)


def _packing(about: Any) -> list[str]:
    """How the rows were packed, from the parts a state keeps (a mix keeps one per source)."""
    if not isinstance(about, dict):
        return []
    lines = []
    for key, kept in about.items():
        pack = kept[0] if isinstance(kept, list) and len(kept) == 1 else kept  # parts are kept as one-item lists
        if (key == "packing" or key.endswith(" packing")) and isinstance(pack, dict) and pack.get("mode"):
            where = f" ({key[: -len(' packing')]})" if key != "packing" else ""
            mode = PACKING_MODES.get(str(pack["mode"]))
            cursor = mode.cursor_words() if mode is not None else None
            lines.append(f"packing{where}: {packing_words(pack)}" + (f"; {cursor}" if cursor else ""))
    return lines


def _declared(state: dict[str, Any]) -> list[str]:
    """The pipeline part of a state described from the parts it keeps (``about``)."""
    saved = state.get("about")
    about: dict[str, Any] = saved if isinstance(saved, dict) else {}
    names = _stage_names(about)
    node = state.get("pipeline")
    chain = []
    for _ in names:
        if not isinstance(node, dict) or "upstream" not in node:
            break
        chain.append(node)
        node = node["upstream"]
    root = root_plan_named(about)
    if root is None or len(chain) != len(names):
        return [f"pipeline (its parts were not saved with the state): {json.dumps(state.get('pipeline'))[:400]}"]
    node, even = peel_even(node, "even" in about)
    lines = root.describe_state(node, state_split(state), None) + even
    for i, (name, own) in enumerate(zip(names, reversed(chain))):
        stage = Stage.named(name)
        lines.append(f"stage {i + 1} ({name}): {stage.describe_state(own) if stage is not None else Stage.describe_state(own)}")
    return lines


def _stage_names(about: dict[str, Any]) -> list[str]:
    named = []
    for key in about:
        if key.startswith("stage ") and " (" in key:
            number, name = key[len("stage ") :].split(" (", 1)
            if number.isdigit():
                named.append((int(number), name.rstrip(")")))
    return [name for _, name in sorted(named)]

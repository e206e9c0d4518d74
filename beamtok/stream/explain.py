"""A saved state in words: which reader saved it, where each stage and each open shard stands.

A state names shards by their index in the dataset's shard list and positions by doc cursor;
given the pipeline, shard indices become file names and cursors become what they mean in that
file (byte offset of uncompressed JSONL, line of compressed JSONL, row of Parquet and Arrow).
States are found wherever they sit in a JSON file: alone, as a list of readers' states, or
inside a checkpoint (a StatefulDataLoader's or a Trainer's ``trainer_state.json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from beamtok.stream.dataset import Dataset

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


def explain_state(state: dict[str, Any], dataset: Dataset | None = None) -> list[str]:
    """Lines describing ``state``; with ``dataset`` (the pipeline it belongs to), shards are
    named by file and cursors by what they count there."""
    lines = [f"beamtok state format {state.get('beamtok_state')}, spec {state.get('spec')}, stream {state.get('stream')}"]
    split = state.get("split")
    if isinstance(split, dict):
        lines.append(
            f"reader: rank {split.get('rank')} of {split.get('world_size')}, DataLoader worker {split.get('worker')} "
            f"of {split.get('num_workers')}, data split by {split.get('mode')}"
        )
    stages = _stage_names(state.get("about"))
    node = state.get("pipeline")
    chain = []
    while isinstance(node, dict) and "upstream" in node:
        chain.append(node)
        node = node["upstream"]
    lines += _source_lines(node, dataset, "")
    chain.reverse()  # from the stage nearest the source to the last
    named = len(stages) == len(chain)
    for i, stage in enumerate(chain):
        lines.append(f"stage {i + 1} ({stages[i]}): {_stage_words(stage)}" if named else _stage_words(stage))
    return lines


def _stage_names(about: Any) -> list[str]:
    if not isinstance(about, dict):
        return []
    named = []
    for key in about:
        if key.startswith("stage ") and "(" in key:
            number, name = key[len("stage ") :].split(" (", 1)
            named.append((int(number), name.rstrip(")")))
    return [name for _, name in sorted(named)]


def _stage_words(node: dict[str, Any]) -> str:
    if "window" in node:
        drain = node.get("drain") or []
        extra = f"; it first finishes {len(drain)} window(s) of readers of another world size" if drain else ""
        return (
            f"window {node['window']} (counted over the whole stream), {node['emitted']} of its examples delivered; "
            f"a resume re-reads this window from the source position above{extra}"
        )
    if "taken" in node:
        return f"{node['taken']} examples taken"
    if "count" in node:
        return f"the next number is {node['count']}"
    if "seen" in node:
        return f"example split: {node['seen']} examples of the whole stream seen (this reader keeps every k-th)"
    return "no position of its own (a batch starts afresh at a batch boundary)"


def _source_lines(node: Any, dataset: Dataset | None, indent: str) -> list[str]:
    if not isinstance(node, dict):
        return [f"{indent}source: unreadable ({node!r})"]
    if "sources" in node:
        sources = dataset.sources if dataset is not None and len(dataset.sources) == len(node["sources"]) else None
        lines = [f"{indent}mix: {node['index']} examples decided so far (the global index), stopped: {node['stopped']}"]
        for i, source in enumerate(node["sources"]):
            lines.append(f"{indent}  mix source {i}:")
            lines += _source_lines(source, sources[i] if sources is not None else None, indent + "    ")
        return lines
    stats = node.get("stats", {})
    delivered = (
        f"{stats.get('examples', 0):,} examples, {stats.get('tokens', 0):,} tokens, "
        f"{stats.get('documents', {}).get('read', 0):,} documents finished"
        if isinstance(stats, dict)
        else "?"
    )
    if "slots" not in node:
        return [f"{indent}global shuffle: epoch {node.get('epoch')}, position {node.get('position')} of the epoch's permutation; handed out so far: {delivered}"]
    shards = dataset.shards if dataset is not None and not dataset.sources[1:] else None
    lines = [
        f"{indent}shard source: epoch {node['epoch']}, {node['position']} shard(s) of this epoch's order opened; "
        f"handed out so far: {delivered}"
    ]
    open_slots = node.get("slots") or []
    if not open_slots:
        lines.append(f"{indent}  no shard open: the next starts at the beginning of shard {node['position']} of the order")
    for slot in open_slots:
        lines.append(f"{indent}  open: {_slot_line(slot, shards)}")
    for slot in node.get("carry") or []:
        lines.append(f"{indent}  to finish first (from readers of another world size): {_slot_line(slot, shards)}")
    return lines


def _slot_line(slot: dict[str, Any], shards: Sequence[Any] | None) -> str:
    index = slot.get("shard")
    cursor = slot.get("cursor", {})
    url = shards[index].url if shards is not None and isinstance(index, int) and index < len(shards) else None
    where = _cursor_words(url, cursor.get("doc", 0))
    name = f"shard {index} ({url})" if url else f"shard {index}"
    if cursor.get("done"):
        return f"{name}: finished"
    return f"{name}: next example {cursor.get('index')} of the shard starts at {where}, token {cursor.get('token')} of that document"


def _cursor_words(url: str | None, doc: int) -> str:
    if url is None:
        return f"doc cursor {doc}"
    from beamtok.sources.readers import detect_format, is_compressed

    try:
        fmt = detect_format(url)
    except Exception:
        return f"doc cursor {doc}"
    if fmt == "jsonl":
        return f"line {doc + 1}" if is_compressed(url) else f"byte {doc:,}"
    if fmt in ("parquet", "arrow"):
        return f"row {doc:,}"
    if fmt == "text":
        return "the file's one document"
    return f"doc cursor {doc}"

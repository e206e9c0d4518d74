"""A shard source's saved state in words, for ``beamtok inspect`` and refused resumes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beamtok._src.sources.readers import cursor_words
from beamtok._src.sources.urls import Shard
from beamtok._src.stream.reading.stats import describe_stats

__all__ = ["shard_source_words"]


def shard_source_words(state: Any, shards: Sequence[Shard] | None = None, indent: str = "") -> list[str]:
    """Lines describing a shard source's state; with ``shards``, shards are named by file and
    cursors by what they count in it."""
    if not isinstance(state, dict) or "slots" not in state:
        return [f"{indent}shard source: unreadable ({state!r})"]
    lines = [
        f"{indent}shard source: epoch {state.get('epoch')}, {state.get('position')} shard(s) of this epoch's order opened; "
        f"handed out so far: {describe_stats(state.get('stats'))}"
    ]
    open_slots = state.get("slots") or []
    if not open_slots:
        lines.append(
            f"{indent}  no shard open: the next starts at the beginning of shard {state.get('position')} of the order"
        )
    for slot in open_slots:
        lines.append(f"{indent}  open: {_slot_words(slot, shards)}")
    for slot in state.get("carry") or []:
        lines.append(f"{indent}  to finish first (from readers of another world size): {_slot_words(slot, shards)}")
    return lines


def _slot_words(slot: Any, shards: Sequence[Shard] | None) -> str:
    if not isinstance(slot, dict):
        return f"unreadable ({slot!r})"
    index = slot.get("shard")
    saved = slot.get("cursor")
    cursor: dict[str, Any] = saved if isinstance(saved, dict) else {}
    url = shards[index].url if shards is not None and isinstance(index, int) and 0 <= index < len(shards) else None
    name = f"shard {index} ({url})" if url else f"shard {index}"
    if cursor.get("done"):
        return f"{name}: finished"
    where = cursor_words(url, cursor.get("doc", 0))
    return f"{name}: next example {cursor.get('index')} of the shard starts at {where}, token {cursor.get('token')} of that document"

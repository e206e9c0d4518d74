"""Files cut into ranges for readers: when a dataset's files are fewer than the readers that
share them, and when a resume must cut them as the saved run did (see
``beamtok._src.sources.byte_ranges`` for the ranges themselves)."""

from __future__ import annotations

from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.sources.byte_ranges import AUTO
from beamtok._src.stream.roots.base import RootPlan
from beamtok._src.stream.roots.shards import ShardsRoot

__all__ = ["cut_as_saved", "cut_for_readers"]


def cut_for_readers(root: RootPlan, readers: int, layout: str) -> RootPlan:
    """``root`` split by shards over ``readers`` (``layout`` names them in a message): files
    read on the fly that are fewer than the readers cut ``"auto"`` into ranges; ConfigError,
    in one line, where the shards are still fewer."""
    if not isinstance(root, ShardsRoot) or len(root.files) >= readers:
        return root
    cut = root.cut(AUTO) if root.cuttable else root
    if len(cut.files) >= readers:
        return cut
    what = f"{len(cut.files)} shard(s)"
    if root.cuttable:
        grew = len(cut.files) > len(root.files)
        what += (
            f" ({len(root.files)} file(s) cut into ranges)"
            if grew
            else " (compressed or other files read whole cannot be cut into ranges)"
        )
    raise ConfigError(
        f"{what} cannot be split over {readers} readers ({layout}): "
        "use more shards (from_files(..., split_bytes=...) cuts files finer), fewer workers, or split='examples'"
    )


def cut_as_saved(root: RootPlan, states: Any) -> RootPlan:
    """``root`` with its files cut as the saved states' were, where ``shard_by_rank`` cut
    them by itself there (more readers than files) and would not here (a resume on fewer)."""
    if not isinstance(root, ShardsRoot) or not root.cuttable:
        return root
    for state in states if isinstance(states, list) else [states]:
        plan = state.get("plan") if isinstance(state, dict) else None
        saved = plan.get("root") if isinstance(plan, dict) else None
        if isinstance(saved, dict) and saved.get("ranges") == AUTO:
            return root.cut(AUTO)
    return root

"""Every stage and root of the stream by the name a plan gives it: the one table through which
a saved plan's stages and root are found again (``beamtok inspect``, ``explain_state``).
A new stage or root is added here; the test of this table fails on one left out."""

from __future__ import annotations

from typing import Any

from beamtok._src.stream.node import Stage
from beamtok._src.stream.ranks.balance import BalanceRanks
from beamtok._src.stream.roots.base import RootPlan
from beamtok._src.stream.roots.global_shuffle import GlobalShuffleRoot
from beamtok._src.stream.roots.mix import MixRoot
from beamtok._src.stream.roots.shards import ShardsRoot
from beamtok._src.stream.stages.batch import Batch
from beamtok._src.stream.stages.enumerate import Enumerate
from beamtok._src.stream.stages.shuffle import Shuffle
from beamtok._src.stream.stages.take import Take
from beamtok._src.stream.stages.token_batch import BatchTokens

__all__ = ["ROOTS", "STAGES", "root_of_kind", "stage_named"]

STAGES: dict[str, type[Stage]] = {
    stage.NAME: stage for stage in (Shuffle, Batch, BatchTokens, Take, Enumerate, BalanceRanks)
}
ROOTS: dict[str, type[RootPlan]] = {root.KIND: root for root in (ShardsRoot, MixRoot, GlobalShuffleRoot)}


def stage_named(name: Any) -> type[Stage] | None:
    """The stage a plan calls ``name``, or None."""
    return STAGES.get(name) if isinstance(name, str) else None


def root_of_kind(kind: Any) -> type[RootPlan] | None:
    """The root a plan calls ``kind``, or None."""
    return ROOTS.get(kind) if isinstance(kind, str) else None

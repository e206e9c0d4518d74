"""balance_ranks(batch_size, rank, world_size): one global batch dealt so every rank gets about
the same attention cost, not just the same number of rows.

Every rank reads the same stream (no ``shard_by_rank``) and takes it a global batch at a time:
``world_size * batch_size`` rows. The rows are dealt longest-processing-time first under a
row count: in decreasing order of cost, each to the rank with the least cost so far among those
with fewer than ``batch_size`` rows (ties to the lower rank). A row's cost is the attention it
needs, the sum over its documents (segments) of their length squared; a row without segments
costs its length squared. Every rank computes the same deal and keeps its own share, in stream
order. The imbalance (the largest rank's cost over the mean) is measured for the deal and for
the plain split (rank ``r`` taking rows ``r, r + world_size, ...``) and reported in
``stats()["balance"]`` (the largest rank's cost over the mean, summed over global batches).
A last global batch with fewer rows than ranks is dropped (``dropped_rows``), so every rank
ends at the same step and none waits at a collective the others never reach.

The stage is windowed (``beamtok._src.stream.stages.window``) with one output per window, so a state is
always at a global batch boundary and the same on every rank: a resume may change the world
size and the rank (they are free on resume); any old rank's state resumes every new rank.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.extras import require
from beamtok._src.base.sizes import MAX_BATCH_ROWS, check_ceiling
from beamtok._src.base.validate import check_choice, check_int
from beamtok._src.stream.node import Node, Stage, StreamContext
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.stages.collate import Batched, collate
from beamtok._src.stream.stages.window import WindowNode
from beamtok._src.stream.state import BalancedState

__all__ = ["BalanceRanks", "BalancedNode", "attention_cost", "deal_rows"]


def attention_cost(row: dict[str, Any]) -> int:
    """Sum over the row's documents of their length squared (padding costs nothing)."""
    segments = row.get("segment_ids")
    if segments is None:
        return len(row["input_ids"]) ** 2
    counts = np.bincount(np.asarray(segments))[1:]
    return int((counts.astype(np.int64) ** 2).sum())


def deal_rows(costs: list[int], ranks: int, per_rank: int) -> list[list[int]]:
    """Row indices per rank: costliest first, each to the cheapest rank with room."""
    order = sorted(range(len(costs)), key=lambda i: (-costs[i], i))
    heap = [(0, r) for r in range(ranks)]  # (cost so far, rank) of ranks with room
    shares: list[list[int]] = [[] for _ in range(ranks)]
    for i in order:
        if not heap:
            break
        load, r = heapq.heappop(heap)
        shares[r].append(i)
        if len(shares[r]) < per_rank:
            heapq.heappush(heap, (load + costs[i], r))
    return [sorted(share) for share in shares]


@dataclass(frozen=True)
class BalanceRanks(Stage):
    """This rank's share of each global batch, dealt by attention cost."""

    NAME = "balance_ranks"
    REREADS_ON_RESUME = True
    FREE_ON_RESUME = ("rank", "world_size")  # a state is at a global batch boundary, the same on every rank

    batch_size: int
    rank: int = 0
    world_size: int = 1
    tensors: str = "numpy"

    def __post_init__(self) -> None:
        check_int(self.batch_size, "batch size", minimum=1)
        check_int(self.world_size, "world_size", minimum=1)
        check_ceiling(self.batch_size * self.world_size, "global batch", MAX_BATCH_ROWS, "rows")
        if not isinstance(self.rank, int) or not 0 <= self.rank < self.world_size:
            raise ConfigError(f"rank must be in 0..world_size-1, got rank={self.rank!r} world_size={self.world_size!r}")
        check_choice(self.tensors, "tensors", ("numpy", "torch"))
        if self.tensors == "torch":
            require('balance_ranks(tensors="torch")', "torch")

    def rows_held(self) -> int:
        return self.batch_size * self.world_size

    def build(self, upstream: Node, context: StreamContext) -> Node:
        return BalancedNode(upstream, self, context.pad_id, context.rebuild)

    @classmethod
    def describe_state(cls, state: dict[str, Any]) -> str:
        return f"global batch {state.get('window')} is next (every rank's state is the same here)"


class BalancedNode(WindowNode[BalancedState]):
    """Reads global batches, keeps this rank's balanced share, measures the imbalance."""

    NAME = "balance_ranks"
    MEASURED = "balance"  # [global batches, summed largest rank cost dealt, the same split plainly, summed total cost, rows dropped]

    def __init__(
        self,
        upstream: Node,
        config: BalanceRanks,
        pad_id: int,
        rebuild: Callable[[ReaderSplit], tuple[Any, Node]] | None = None,
    ) -> None:
        self.config = config
        self.pad_id = pad_id
        self._measured = [0, 0, 0, 0, 0]
        super().__init__(upstream, config.batch_size * config.world_size, rebuild)

    def arrange(self, items: list[Any], window: int) -> list[Any]:
        config = self.config
        if len(items) < config.world_size:  # a last global batch too short to give every rank a row
            self._measured[4] += len(items)  # dropped, so every rank ends at the same step; counted
            return []
        costs = [attention_cost(row) for row in items]
        per_rank = -(-len(items) // config.world_size)  # the last global batch may be short
        shares = deal_rows(costs, config.world_size, per_rank)
        plain = [list(range(r, len(items), config.world_size)) for r in range(config.world_size)]
        self._measured[0] += 1
        self._measured[1] += max(sum(costs[i] for i in share) for share in shares)
        self._measured[2] += max(sum(costs[i] for i in share) for share in plain)
        self._measured[3] += sum(costs)
        mine = shares[config.rank]
        return [Batched(collate([items[i] for i in mine], self.pad_id, config.tensors))]

    def state_dict(self) -> BalancedState:
        return BalancedState(**super().state_dict(), balance=list(self._measured))

    def reset(self, state: BalancedState | None) -> None:
        measured = [0, 0, 0, 0, 0]
        saved: Any = state
        if isinstance(state, dict) and self.MEASURED in state:
            saved = dict(state)
            measured = _measured_of(saved.pop(self.MEASURED))
        super().reset(saved)
        self._measured = measured

    def merge(self, states: list[BalancedState], olds: list[ReaderSplit], new: ReaderSplit) -> BalancedState:
        """Every old rank's state is the same (a global batch boundary); their figures are too."""
        stripped: Any = [
            {k: v for k, v in s.items() if k != self.MEASURED} if isinstance(s, dict) else s for s in states
        ]
        merged = super().merge(stripped, olds, new)
        if isinstance(states[0], dict) and self.MEASURED in states[0]:
            merged["balance"] = _measured_of(states[0]["balance"])
        return merged

    def stage_stats(self) -> dict[str, Any]:
        """The imbalance over the global batches dealt so far: the largest rank's attention
        cost over the mean, summed over global batches, dealt and for the plain split."""
        batches, dealt, plain, total, dropped = self._measured
        mean = total / self.config.world_size
        return {
            "balance": {
                "global_batches": batches,
                "imbalance": dealt / mean if mean else 1.0,
                "imbalance_plain_split": plain / mean if mean else 1.0,
                "dropped_rows": dropped,
            }
        }


def _measured_of(saved: Any) -> list[int]:
    if not isinstance(saved, list) or len(saved) != 5:
        raise StateError("balance_ranks: balance must be a list of 5 counts")
    return [check_int(v, "balance", "balance_ranks") for v in saved]

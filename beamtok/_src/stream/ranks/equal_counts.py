"""``shard_by_rank(..., even="drop" | "pad")``: every reader ends with the same number of
examples, so no data-parallel rank waits at a last all-reduce for a batch another never makes.

``drop`` ends every reader at the smallest reader's count, ``pad`` fills every reader up to the
largest one's with padding rows (all pad tokens, no loss, provenance -1). How a reader knows
the counts depends on the split:

- readers split by examples see the whole stream: the example split itself holds back its
  example of a last round that not every reader completes (``drop``, reading ahead at most a
  round) or adds one padding row at the end (``pad``);
- readers split by shards or by global-shuffle positions cannot see each other: their counts
  must be known before reading, from a cache's row counts (``RootPlan.reader_counts``); an
  :class:`EvenNode` after the root stops or pads there. On-the-fly shard splits and mixes
  cannot know them and are refused by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.validate import check_int
from beamtok._src.core.spec import Spec
from beamtok._src.shards.items import with_training_fields
from beamtok._src.stream.node import Node, StageNode
from beamtok._src.stream.state import NodeState

__all__ = ["EVEN_MODES", "EvenNode", "fresh_pad", "pad_example"]

EVEN_MODES = ("drop", "pad")


def pad_example(spec: Spec) -> dict[str, Any]:
    """A row of padding shaped like the rows of ``spec``: pad tokens, segment 0, no loss."""
    pack = spec.pack
    if pack is None or not pack.packing.HAS_SEQ_LEN or pack.seq_len is None:
        raise ConfigError(
            "even='pad' adds padding rows, which needs rows of one width: pack the data (concat_chunk, pad...)"
        )
    width = pack.seq_len
    row: dict[str, Any] = {
        "input_ids": np.full(width, spec.pad_id, dtype=np.int32),
        "segment_ids": np.zeros(width, dtype=np.int32),
        "position_ids": np.zeros(width, dtype=np.int32),
        "loss_mask": np.zeros(width, dtype=np.int8),
    }
    if spec.supervised:
        row = with_training_fields(row)
    row.update(shard=-1, index=-1, doc=-1, token=0)
    return row


def fresh_pad(pad: dict[str, Any]) -> dict[str, Any]:
    """A copy of a padding row whose arrays the consumer may change."""
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in pad.items()}


class EvenNode(StageNode[NodeState]):
    """This reader's examples up to ``target`` (fewer of its own: padding rows fill up to it)."""

    KEYS = ("upstream", "emitted")
    NAME = "even"

    def __init__(self, upstream: Node, own: int, target: int, pad: dict[str, Any] | None) -> None:
        super().__init__(upstream)
        self.own, self.target, self.pad = own, target, pad
        self._emitted = 0

    @classmethod
    def describe_state(cls, state: Any) -> str:
        return f"even split: {state.get('emitted') if isinstance(state, dict) else '?'} examples handed out of this reader's share"

    def check_merge(self, olds: list[Any]) -> None:
        """Refuse a resume on another world size: the counts were each reader's share of the
        old split, and the new readers' shares of what is left are not known before reading."""
        raise StateError(
            "cannot resume on another world size through shard_by_rank(even=...): "
            f"each reader's count was its share of the old split ({olds[0].world_size} ranks); resume with that world size, "
            "or let the ranks agree as they read with DistributedLoader(even=...), which resumes on any world size"
        )

    def _restore(self, state: dict[str, Any] | None) -> None:
        self._emitted = 0 if state is None else check_int(state["emitted"], "emitted", self.NAME)
        if self._emitted > self.target:
            raise StateError(
                f"{self.NAME}: {self._emitted} handed out is more than the {self.target} every reader gets"
            )

    def _position(self) -> dict[str, Any]:
        return {"emitted": self._emitted}

    def __next__(self) -> Any:
        if self._emitted >= self.target:
            raise StopIteration
        if self._emitted < self.own:
            item = next(self.upstream)
        else:
            assert self.pad is not None  # a target above the own count is padding
            item = fresh_pad(self.pad)
        self._emitted += 1
        return item

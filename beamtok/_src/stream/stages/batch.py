"""batch(size, drop_last, tensors, mask_starts, pad_positions): collate examples into batches
of numpy arrays or tensors, optionally in the packed-row conventions other trainers use.

A batch is made one of two ways, and both give the same batch for the same rows
(tests/stream/stages/test_batch_paths.py holds them equal, field by field, with the token counts):

- **row blocks**: where the upstream hands decoded column blocks (``Node.next_rows``: a
  cache read in order, the on-the-fly column path), rows of one width are sliced and stacked
  column-wise, with no dict per example; rows of several widths fall back to the examples.
- **examples**: any other upstream (a shuffle's window, a mix, a take) holds examples one by
  one, so there is nothing to stack by column: its examples are collated.

The second way stays because those stages hold single examples; making each of them keep
blocks would move the cost into them rather than remove it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.extras import require
from beamtok._src.base.sizes import MAX_BATCH_ROWS, check_ceiling
from beamtok._src.base.validate import check_choice, check_int
from beamtok._src.shards.spans import stack_taken
from beamtok._src.stream.node import Node, Stage, StageNode, StreamContext
from beamtok._src.stream.stages.collate import PAD_POSITIONS, Batched, collate, packed_conventions, to_tensors
from beamtok._src.stream.state import NodeState

__all__ = ["Batch", "BatchNode"]


@dataclass(frozen=True)
class Batch(Stage):
    """Group ``size`` examples into one batch; ragged fields are padded (``input_ids`` with
    the tokenizer's pad id). ``drop_last`` drops a short last batch. ``mask_starts`` and
    ``pad_positions``: see :func:`~beamtok._src.stream.stages.collate.packed_conventions`."""

    NAME = "batch"
    # a state is always at a batch boundary, and the conventions touch no position
    FREE_ON_RESUME = ("size", "drop_last", "tensors", "mask_starts", "pad_positions")

    size: int
    drop_last: bool = False
    tensors: str = "numpy"
    mask_starts: bool = False
    pad_positions: str = "zero"

    def __post_init__(self) -> None:
        check_int(self.size, "batch size", minimum=1)
        check_ceiling(self.size, "batch size", MAX_BATCH_ROWS, "rows")
        check_choice(self.tensors, "tensors", ("numpy", "torch"))
        check_choice(self.pad_positions, "pad_positions", PAD_POSITIONS)
        if not isinstance(self.mask_starts, bool):
            raise ConfigError(f"mask_starts must be true or false, not {self.mask_starts!r}")
        if self.tensors == "torch":
            require('batch(tensors="torch")', "torch")

    def to_json(self) -> dict[str, Any]:
        # the conventions join the JSON only when asked for: fingerprints of batches without them stay as they were
        out = super().to_json()
        for name, default in (("mask_starts", False), ("pad_positions", "zero")):
            if out[name] == default:
                del out[name]
        return out

    def rows_held(self) -> int:
        return self.size

    def build(self, upstream: Node, context: StreamContext) -> Node:
        return BatchNode(upstream, self, context.pad_id)

    @classmethod
    def describe_state(cls, state: dict[str, Any]) -> str:
        return "no position of its own (a batch starts afresh at a batch boundary)"


class BatchNode(StageNode[NodeState]):
    NAME = "batch"

    def __init__(self, upstream: Node, config: Batch, pad_id: int) -> None:
        super().__init__(upstream)
        self.config = config
        self.pad_id = pad_id

    def can_seek(self) -> bool:
        return self.upstream.can_seek()

    def seek(self, items: int) -> int:
        size = self.config.size
        rows = self.upstream.seek(items * size)
        whole, part = divmod(rows, size)
        return whole + (1 if part and not self.config.drop_last else 0)

    def __next__(self) -> dict[str, Any]:
        size = self.config.size
        pieces = self.upstream.next_rows(size)
        if pieces is not None:  # decoded row blocks straight from the source: no dict per example
            rows = sum(p.rows for p in pieces)
            if not rows or (self.config.drop_last and rows < size):
                raise StopIteration
            stacked = stack_taken(pieces)
            if stacked is not None:
                stacked = self._conventions(stacked)
                batch = Batched(to_tensors(stacked) if self.config.tensors == "torch" else stacked)
                if "segment_ids" in batch:  # stacked rows are token rows: each piece has its counts
                    real = pad = 0
                    for piece in pieces:
                        counted = piece.tokens()
                        assert counted is not None
                        real, pad = real + counted[0], pad + counted[1]
                    batch.counted = (real, pad)
                return batch
            examples = [example for p in pieces for example in p.examples()]
            return self._collated(examples)
        examples = list(itertools.islice(self.upstream, size))
        if not examples or (self.config.drop_last and len(examples) < self.config.size):
            raise StopIteration
        return self._collated(examples)

    def _collated(self, examples: list[dict[str, Any]]) -> Batched:
        batch = self._conventions(collate(examples, self.pad_id))
        return Batched(to_tensors(batch) if self.config.tensors == "torch" else batch)

    def _conventions(self, batch: dict[str, Any]) -> dict[str, Any]:
        if not self.config.mask_starts and self.config.pad_positions == "zero":
            return batch
        return packed_conventions(batch, mask_starts=self.config.mask_starts, pad_positions=self.config.pad_positions)

"""batch_tokens(max_tokens): batches of one row length and a fixed token budget, with curricula.

Rows are bucketed by length rounded up to a power of two (at least ``min_len``); a batch
holds rows of one bucket only, ``max_tokens // bucket`` of them, so every full batch carries
about ``max_tokens`` tokens whatever its row length, and shorter rows are not padded to the
longest in the stream (each row is padded to the longest of its batch, at most its bucket).
Rows are taken in windows of ``window`` rows; a window's last batch of each bucket may be
short. The order of a window's batches is the curriculum:

- ``"natural"``: a seeded permutation of the window's batches (keyed by seed and window);
- ``"grow"``: the window's batches dealt into ``cycles`` cycles, each ordered short rows
  first (within a length, in the order they were made).

``max_len`` may be a schedule ``[(start_row, length), ...]``: from the first window starting at
or after ``start_row`` (rows counted on this reader's stream before the stage), rows longer than
``length`` are cut into pieces of at most ``length`` tokens, each a row of its own with
positions restarting, so a model can warm up on short sequences and grow.

The stage is windowed (``beamtok._src.stream.stages.window``): its state is the upstream position where
the window began, the window number and the batches handed out, so a resume re-reads one
window and a resume on another world size finishes old readers' windows first.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.extras import require
from beamtok._src.base.sizes import MAX_SEQ_LEN, MAX_WINDOW, check_ceiling
from beamtok._src.base.validate import check_choice
from beamtok._src.base.validate import check_int as check_option
from beamtok._src.stream.node import Node, Stage, StreamContext
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.stages.collate import Batched, collate
from beamtok._src.stream.stages.window import WindowNode, describe_window_state
from beamtok._src.stream.state import WindowState

__all__ = ["ORDERS", "BatchTokens", "TokenBatchNode", "bucket_of"]

ORDERS = ("natural", "grow")
CUT_FIELDS = ("input_ids", "segment_ids", "position_ids", "loss_mask", "labels", "attention_mask")


def bucket_of(length: int, min_len: int) -> int:
    """The power of two at or above ``length`` (and at least ``min_len``)."""
    return max(min_len, 1 << max(0, length - 1).bit_length())


@dataclass(frozen=True)
class BatchTokens(Stage):
    """Batches of rows of one length bucket, ``max_tokens // bucket`` rows each."""

    NAME = "batch_tokens"
    REREADS_ON_RESUME = True

    max_tokens: int
    window: int = 4096
    order: str = "natural"
    cycles: int = 1
    seed: int = 0
    min_len: int = 64
    max_len: tuple[tuple[int, int], ...] | None = None  # (start_row, length) stages
    tensors: str = "numpy"

    def __post_init__(self) -> None:
        check_option(self.max_tokens, "max_tokens", minimum=1)
        check_option(self.window, "window", minimum=1)
        check_ceiling(self.window, "batch_tokens window", MAX_WINDOW, "rows")
        check_choice(self.order, "order", ORDERS)
        check_option(self.cycles, "cycles", minimum=1)
        check_option(self.seed, "seed")
        check_option(self.min_len, "min_len", minimum=1)
        if self.min_len & (self.min_len - 1):
            raise ConfigError(f"min_len must be a power of two, got {self.min_len}")
        check_choice(self.tensors, "tensors", ("numpy", "torch"))
        if self.tensors == "torch":
            require('batch_tokens(tensors="torch")', "torch")
        if self.max_len is not None:
            previous = -1
            for stage in self.max_len:
                if not isinstance(stage, (tuple, list)) or len(stage) != 2:
                    raise ConfigError(f"a max_len schedule stage is (start_row, length), got {stage!r}")
                start, length = stage
                check_option(start, "max_len schedule start_row")
                check_option(length, "max_len", minimum=1)
                check_ceiling(length, "max_len", MAX_SEQ_LEN, "tokens")
                if start <= previous:
                    raise ConfigError("max_len schedule stages must start at increasing rows")
                previous = start
            if self.max_len[0][0] != 0:
                raise ConfigError("the first max_len schedule stage must start at row 0")

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["max_len"] = [list(stage) for stage in self.max_len] if self.max_len is not None else None
        return out

    def rows_held(self) -> int:
        return self.window

    def build(self, upstream: Node, context: StreamContext) -> Node:
        return TokenBatchNode(upstream, self, context.pad_id, context.rebuild)

    def cap_at(self, row: int) -> int | None:
        """The longest row allowed in a window starting at upstream row ``row``."""
        if self.max_len is None:
            return None
        return next(length for start, length in reversed(self.max_len) if start <= row)

    @classmethod
    def describe_state(cls, state: dict[str, Any]) -> str:
        return describe_window_state(state, "batches")


class TokenBatchNode(WindowNode[WindowState]):
    """Each window's rows as token-budget batches in curriculum order."""

    NAME = "batch_tokens"

    def __init__(
        self,
        upstream: Node,
        config: BatchTokens,
        pad_id: int,
        rebuild: Callable[[ReaderSplit], tuple[Any, Node]] | None = None,
    ) -> None:
        self.config = config
        self.pad_id = pad_id
        self._warned_over_budget = False
        super().__init__(upstream, config.window, rebuild)

    def arrange(self, items: list[Any], window: int) -> list[Any]:
        config = self.config
        cap = config.cap_at(window * config.window)
        rows = [piece for row in items for piece in _cut(row, cap)] if cap is not None else items
        buckets: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            if not isinstance(row, dict) or "input_ids" not in row:
                raise ConfigError(
                    "batch_tokens() batches examples with input_ids: call it after tokenize() (and before batch())"
                )
            if len(row["input_ids"]) > config.max_tokens and not self._warned_over_budget:
                self._warned_over_budget = True
                warnings.warn(
                    f"batch_tokens({config.max_tokens}): a row of {len(row['input_ids']):,} tokens is over the budget of one "
                    "batch; such rows go in batches of their own, over the budget; raise max_tokens to the longest row, "
                    f"or cut rows with max_len={config.max_tokens}",
                    stacklevel=2,
                )
            buckets.setdefault(bucket_of(len(row["input_ids"]), config.min_len), []).append(row)
        batches: list[tuple[int, list[dict[str, Any]]]] = []
        for length in sorted(buckets):
            per_batch = max(1, config.max_tokens // length)
            members = buckets[length]
            batches += [(length, members[i : i + per_batch]) for i in range(0, len(members), per_batch)]
        if config.order == "natural":
            perm = np.random.default_rng([config.seed, window]).permutation(len(batches))
            ordered = [batches[i] for i in perm]
        else:
            ordered = _grown(batches, config.cycles)
        return [Batched(collate(members, self.pad_id, config.tensors)) for _, members in ordered]


def _grown(batches: list[tuple[int, list[Any]]], cycles: int) -> list[tuple[int, list[Any]]]:
    """Batches dealt round robin into ``cycles`` cycles per length, each cycle short to long
    (``batches`` come by length, so each cycle fills in that order)."""
    dealt: list[list[tuple[int, list[Any]]]] = [[] for _ in range(cycles)]
    seen: dict[int, int] = {}
    for batch in batches:
        k = seen.get(batch[0], 0)
        seen[batch[0]] = k + 1
        dealt[k % cycles].append(batch)
    return [batch for cycle in dealt for batch in cycle]


def _cut(row: Any, cap: int) -> list[Any]:
    """``row`` in pieces of at most ``cap`` tokens, positions restarting in each piece."""
    if not isinstance(row, dict) or "input_ids" not in row or len(row["input_ids"]) <= cap:
        return [row]
    n = len(row["input_ids"])
    pieces = []
    for start in range(0, n, cap):
        piece = dict(row)
        for name in CUT_FIELDS:
            if name in row and isinstance(row[name], np.ndarray):
                piece[name] = row[name][start : start + cap]
        if "position_ids" in piece and "segment_ids" in piece:
            piece["position_ids"] = _restarted(piece["position_ids"], piece["segment_ids"])
        pieces.append(piece)
    return pieces


def _restarted(positions: np.ndarray, segments: np.ndarray) -> np.ndarray:
    """Positions of a piece cut from a row: the segment it opens inside restarts at 0."""
    out = positions.copy()
    first = segments[0]
    inside = segments == first
    if first and positions[0]:
        out[inside] = positions[inside] - positions[0]
    return out

"""The stream stages of the fluent Dataset: shuffle, batching (by count, by token budget, or
balanced between ranks), take and enumerate. Each adds one stage after the root; they run the
same on the fly and from a cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.sizes import ROW_BYTES_PER_TOKEN, check_memory
from beamtok._src.stream.node import Stage
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.ranks.balance import BalanceRanks
from beamtok._src.stream.stages.batch import Batch
from beamtok._src.stream.stages.enumerate import Enumerate
from beamtok._src.stream.stages.shuffle import Shuffle
from beamtok._src.stream.stages.take import Take
from beamtok._src.stream.stages.token_batch import BatchTokens

__all__ = ["StreamStages"]

S = TypeVar("S", bound="StreamStages")


class StreamStages:
    """The stream stage methods of ``Dataset`` (which holds ``_pipeline``)."""

    _pipeline: Pipeline

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def shuffle(self: S, window: int, *, seed: int = 0) -> S:
        """Shuffle examples within windows of ``window``; a checkpoint re-reads at most one window.

        Args:
            window: Examples shuffled together (memory holds one window).
            seed: The seed; each window's order derives from it and the window's number.
        Returns:
            A new Dataset with this stream stage added.
        """
        return self._add_stage(Shuffle(window, seed))

    def batch(
        self: S,
        size: int,
        *,
        drop_last: bool = False,
        tensors: str = "numpy",
        mask_starts: bool = False,
        pad_positions: str = "zero",
    ) -> S:
        """Collate ``size`` examples into a dict of numpy arrays (or torch tensors).

        Packed rows in other trainers' conventions: ``mask_starts=True`` takes the loss off the
        first token of each piece (``loss_mask`` 0, ``labels`` -100), as TRL's padding-free
        collator and ``transformers``' ``DataCollatorWithFlattening`` do by default; off by
        default, since a row's ``loss_mask`` is what its packing made and
        ``beamtok._src.attention.packed_labels`` masks those tokens where labels are made for a
        model. ``pad_positions="continue"`` numbers padding on from the row's last token, so
        ``position_ids == 0`` marks exactly the pieces (flash-attention varlen from position
        ids); the default ``"zero"`` keeps padding at 0.

        Args:
            size: Rows a batch.
            drop_last: Drop a last batch of fewer rows.
            tensors: ``"numpy"`` arrays or ``"torch"`` tensors.
            mask_starts: Zero the loss mask at each segment's first token (no loss across a document edge).
            pad_positions: ``"zero"`` or ``"continue"``: the position ids of padding.
        Returns:
            A new Dataset with this stream stage added.
        """
        return self._add_stage(Batch(size, drop_last, tensors, mask_starts, pad_positions))

    def batch_tokens(
        self: S,
        max_tokens: int,
        *,
        window: int = 4096,
        order: str = "natural",
        cycles: int = 1,
        seed: int = 0,
        min_len: int = 64,
        max_len: int | Sequence[tuple[int, int]] | None = None,
        tensors: str = "numpy",
    ) -> S:
        """Batches of one row length and about ``max_tokens`` tokens: rows bucketed by length
        rounded up to a power of two (at least ``min_len``), ``max_tokens // bucket`` rows a
        batch, over windows of ``window`` rows. ``order``: ``"natural"`` (seeded) or
        ``"grow"`` (each of ``cycles`` cycles short rows first). ``max_len`` (a length, or a
        schedule ``[(start_row, length), ...]``) cuts longer rows into pieces, for a
        sequence-length warm-up. See ``beamtok._src.stream.stages.token_batch``.

        Args:
            max_tokens: The token budget of a batch (rows x row length).
            window: Rows gathered to sort into batches of one length.
            order: ``"natural"`` (seeded) or ``"grow"`` (short rows first in each cycle).
            cycles: Cycles of ``"grow"`` over the stream.
            seed: The seed of the ``"natural"`` order.
            min_len: The smallest bucket (rows shorter are padded up to it).
            max_len: Cut longer rows into pieces of this length, or a schedule ``[(start_row,
                length), ...]``; None: no cut.
            tensors: ``"numpy"`` arrays or ``"torch"`` tensors.
        Returns:
            A new Dataset with this stream stage added.
        """
        schedule = (
            ((0, max_len),)
            if isinstance(max_len, int)
            else tuple(tuple(s) for s in max_len)
            if max_len is not None
            else None
        )
        return self._add_stage(BatchTokens(max_tokens, window, order, cycles, seed, min_len, schedule, tensors))  # type: ignore[arg-type]

    def balance_ranks(self: S, batch_size: int, *, rank: int, world_size: int, tensors: str = "numpy") -> S:
        """This rank's batch of ``batch_size`` rows from each global batch of ``world_size *
        batch_size``, dealt so every rank gets about the same attention cost (the sum of its
        documents' squared lengths), in place of ``shard_by_rank`` + ``batch``: every rank reads
        the whole stream. ``stats()["balance"]`` reports the imbalance dealt and that of a
        plain split. A resume may change rank and world size. See ``beamtok._src.stream.ranks.balance``.

        Args:
            batch_size: Rows of each rank's batch.
            rank: This reader's rank.
            world_size: The number of ranks.
            tensors: ``"numpy"`` arrays or ``"torch"`` tensors.
        Returns:
            A new Dataset with this stream stage added.
        """
        if self._pipeline.reader.world_size > 1:
            raise ConfigError("balance_ranks() deals each global batch between ranks itself: drop shard_by_rank()")
        return self._add_stage(BalanceRanks(batch_size, rank, world_size, tensors))

    def take(self: S, count: int) -> S:
        """Stop after ``count`` items.

        Args:
            count: Items handed out before the stream ends.
        Returns:
            A new Dataset with this stream stage added.
        """
        return self._add_stage(Take(count))

    def enumerate(self: S, start: int = 0) -> S:
        """Yield ``(i, item)`` pairs.

        Args:
            start: The first number.
        Returns:
            A new Dataset whose items are ``(number, item)`` pairs.
        """
        return self._add_stage(Enumerate(start))

    def apply(self: S, stage: Stage) -> S:
        """Add a stream stage of your own (``beamtok.extend.Stage``) after those before it.

        Its ``to_json`` joins the stream's fingerprint, so a state saved with it resumes only
        a stream with the same stage; its live node's ``state_dict``/``reset`` carry its
        position in every checkpoint, and ``beamtok.testing.check_resumption`` checks them.

        Args:
            stage: The stage's configuration; its ``build`` makes the live node.
        Returns:
            A new Dataset with this stream stage added.
        """
        if not isinstance(stage, Stage):
            raise ConfigError(f"apply() takes a beamtok.extend.Stage, not {type(stage).__name__}")
        return self._add_stage(stage)

    def _add_stage(self: S, stage: Stage) -> S:
        stages = (*self._pipeline.stages, stage)
        width = self._pipeline.root.row_tokens
        held = sum(s.rows_held() for s in stages)
        if width is not None and held:  # what the stages hold at once, with a copy for collating
            check_memory(
                f"{stage.NAME}() ({held:,} rows of {width:,} tokens held at once)",
                2 * held * width * ROW_BYTES_PER_TOKEN,
            )
        return type(self)(dataclasses.replace(self._pipeline, stages=stages))

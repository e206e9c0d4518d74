"""The stream stages: shuffle, batching (by count or by token budget), take, enumerate and a
stage of the user's own. Each adds one stage after the root; they run the same on the fly and
from a cache."""

from __future__ import annotations

from collections.abc import Sequence

from beamtok._src.base.errors import ConfigError
from beamtok._src.dataset.stage_adding import D, with_stage
from beamtok._src.stream.node import Stage
from beamtok._src.stream.stages.batch import Batch
from beamtok._src.stream.stages.enumerate import Enumerate
from beamtok._src.stream.stages.shuffle import Shuffle
from beamtok._src.stream.stages.take import Take
from beamtok._src.stream.stages.token_batch import BatchTokens

__all__ = ["apply", "batch", "batch_tokens", "enumerate", "shuffle", "take"]


def shuffle(self: D, window: int, *, seed: int = 0) -> D:
    """Shuffle examples within windows of ``window``; a checkpoint re-reads at most one window.

    Args:
        window: Examples shuffled together (memory holds one window).
        seed: The seed; each window's order derives from it and the window's number.
    Returns:
        A new Dataset with this stream stage added.
    """
    return with_stage(self, Shuffle(window, seed))


def batch(
    self: D,
    size: int,
    *,
    drop_last: bool = False,
    tensors: str = "numpy",
    mask_starts: bool = False,
    pad_positions: str = "zero",
) -> D:
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
    return with_stage(self, Batch(size, drop_last, tensors, mask_starts, pad_positions))


def batch_tokens(
    self: D,
    max_tokens: int,
    *,
    window: int = 4096,
    order: str = "natural",
    cycles: int = 1,
    seed: int = 0,
    min_len: int = 64,
    max_len: int | Sequence[tuple[int, int]] | None = None,
    tensors: str = "numpy",
) -> D:
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
    return with_stage(self, BatchTokens(max_tokens, window, order, cycles, seed, min_len, schedule, tensors))  # type: ignore[arg-type]


def take(self: D, count: int) -> D:
    """Stop after ``count`` items.

    Args:
        count: Items handed out before the stream ends.
    Returns:
        A new Dataset with this stream stage added.
    """
    return with_stage(self, Take(count))


def enumerate(self: D, start: int = 0) -> D:
    """Yield ``(i, item)`` pairs.

    Args:
        start: The first number.
    Returns:
        A new Dataset whose items are ``(number, item)`` pairs.
    """
    return with_stage(self, Enumerate(start))


def apply(self: D, stage: Stage) -> D:
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
    return with_stage(self, stage)

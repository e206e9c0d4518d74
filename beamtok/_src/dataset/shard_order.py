"""How a dataset's shards are read: their order, how many are open at once, epochs, worker
processes, and a packed cache's global shuffle."""

from __future__ import annotations

from beamtok._src.dataset.stage_adding import D, replaced, with_root_options
from beamtok._src.production.worker_process import default_workers
from beamtok._src.stream.roots.global_shuffle import GlobalShuffleRoot
from beamtok._src.stream.roots.shards import shard_root

__all__ = ["global_shuffle", "interleave", "parallel", "repeat", "shuffle_shards"]


def shuffle_shards(self: D, seed: int) -> D:
    """Shuffle the shard order, differently each epoch, with ``seed``.

    Args:
        seed: The seed of each epoch's order.
    Returns:
        A new Dataset.
    """
    return with_root_options(self, shuffle_seed=seed)


def interleave(self: D, open_shards: int) -> D:
    """Read ``open_shards`` shards at once, one example from each in turn.

    Args:
        open_shards: Shards read at once.
    Returns:
        A new Dataset.
    """
    return with_root_options(self, interleave=open_shards)


def repeat(self: D, epochs: int | None = None) -> D:
    """Go over the shards ``epochs`` times (None: forever).

    Args:
        epochs: Passes over the shards (None: forever).
    Returns:
        A new Dataset.
    """
    return with_root_options(self, epochs=epochs)


def parallel(self: D, workers: int | None = None) -> D:
    """Run the shard processing in ``workers`` processes ahead of the consumer (None: one per
    core; 0: in this process). The stream is identical for any count, states included.

    Each open shard (see :meth:`interleave`) and the next shards of the order run in their
    own worker. A worker may run ~8 M tokens of rows ahead of the consumer, so with one
    shard open the next shard's worker stays busy while the consumer reads another, as
    long as a shard's rows fit that budget (a few megabytes of text); with larger shards,
    ``interleave(k)`` with k >= workers keeps every worker busy. Inside a torch DataLoader
    worker the step runs in-process (DataLoader workers cannot fork). Workers start at the
    iterator's first ``next()``.

    Args:
        workers: Worker processes (None: one a core; 0: in this process).
    Returns:
        A new Dataset.
    """
    return with_root_options(self, workers=default_workers() if workers is None else workers)


def global_shuffle(
    self: D,
    seed: int = 0,
    *,
    window: int | None = None,
    spread: int | None = None,
    unit_rows: int | None = None,
    local_copy: bool | str | None = None,
) -> D:
    """Every row of a packed cache once per epoch, in a keyed pseudo-random permutation
    over the whole cache (``window=None``) or within windows of ``window`` consecutive
    rows, reshuffled each epoch (``repeat``). Readers (``shard_by_rank``, DataLoader
    workers) take every k-th position of the one global order; the state is
    ``{epoch, position}``.

    ``spread=K``: windows of K units of ``unit_rows`` consecutive rows of one shard (a
    default row group's, unless given: pass the build's ``row_group_rows`` if it set one)
    drawn anywhere in the cache, their rows taken one unit after another: each row group
    is decoded about once an epoch with no copy, and consecutive rows never come from one
    unit. The rows left at each shard's end after its whole units make the last units. Make K a multiple of the number of readers, and K over
    readers units fit the decode budget: each reader then decodes only its own units.

    ``local_copy`` says how rows are read, never which: a cache larger than a reader's
    decode budget is copied once per machine, at the first ``next()``, into a local
    uncompressed memory-mapped file (``None``, the default; ``True`` always; a directory
    to keep it in, else ``$BEAMTOK_LOCAL_ROWS`` or ``~/.cache/beamtok/local-rows``);
    ``False`` decodes row groups in memory (small row groups, ``--row-group-rows``, keep
    that cheap); with ``spread``, the default is ``False``. See docs/scale.md.

    Args:
        seed: The seed of the permutation (each epoch's derives from it).
        window: Shuffle within windows of this many consecutive rows (None: the whole cache).
        spread: Units drawn anywhere in the cache and read one after another (None: rows one by one).
        unit_rows: Rows of a unit with ``spread`` (default: a row group's).
        local_copy: None (copy where the cache exceeds the decode budget), True, False, or a directory for
            the copy.
    Returns:
        A new Dataset.
    Raises:
        ConfigError: The dataset is not a packed cache.
    """
    if spread is not None and local_copy is None:
        local_copy = False  # spread windows are read whole from decoded row groups: no copy needed
    root = GlobalShuffleRoot(
        shard_root(self.pipeline.root, "global_shuffle()"), seed, window, local_copy, spread, unit_rows
    )
    return replaced(self, root=root)

"""Each rank's part of a dataset: whole shards or every world_size-th example
(``shard_by_rank``), or a share of each global batch balanced by attention cost
(``balance_ranks``)."""

from __future__ import annotations

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import check_choice, check_int
from beamtok._src.dataset.file_ranges import cut_for_readers
from beamtok._src.dataset.stage_adding import D, replaced, with_stage
from beamtok._src.stream.ranks.balance import BalanceRanks
from beamtok._src.stream.ranks.equal_counts import EVEN_MODES
from beamtok._src.stream.ranks.reader_split import SPLIT_MODES, ReaderSplit

__all__ = ["balance_ranks", "shard_by_rank"]


def shard_by_rank(
    self: D,
    rank: int,
    world_size: int,
    *,
    split: str = "shards",
    even: str | None = None,
    loader_workers: int = 0,
) -> D:
    """Read only this rank's part: whole shards (default) or every world_size-th example.

    The readers are ``world_size`` ranks times ``loader_workers`` DataLoader workers each
    (0 and 1: one). Split by shards, files read on the fly that are fewer than the readers
    are cut into ranges first (``from_files(split_bytes="auto")``); a cache or in-memory
    data with fewer shards than readers is refused here, in one line, before any worker
    starts.

    ``even``: every reader (rank, and DataLoader worker) ends with the same number of
    examples, so no rank waits at a last all-reduce: ``"drop"`` ends all at the smallest
    share, ``"pad"`` fills all up to the largest with padding rows (no loss). Readers split
    by examples work it out as they read; split by shards, the counts come from a cache's
    row counts (see ``beamtok._src.stream.ranks.equal_counts``). ``DistributedLoader(even=)`` evens ranks as
    they read instead, for any data and across world sizes.

    Args:
        rank: This reader's rank.
        world_size: The number of ranks.
        split: ``"shards"`` (whole shards) or ``"examples"`` (every world_size-th example).
        even: None, ``"drop"`` or ``"pad"``: every reader ends with the same number of examples.
        loader_workers: DataLoader workers a rank (to check there are shards for every reader).
    Returns:
        A new Dataset.
    Raises:
        ConfigError: The data cannot be split over that many readers (said in one line, before any worker
            starts).
    """
    if even is not None:
        check_choice(even, "even", EVEN_MODES)
    check_choice(split, "split", SPLIT_MODES)
    readers = ReaderSplit(rank, world_size, mode=split).parts * max(1, check_int(loader_workers, "loader_workers"))
    root = (
        cut_for_readers(self.pipeline.root, readers, f"world_size={world_size} x workers={max(1, loader_workers)}")
        if split == "shards"
        else self.pipeline.root
    )
    return replaced(self, root=root, reader=ReaderSplit(rank, world_size, mode=split), even=even)


def balance_ranks(self: D, batch_size: int, *, rank: int, world_size: int, tensors: str = "numpy") -> D:
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
    if self.pipeline.reader.world_size > 1:
        raise ConfigError("balance_ranks() deals each global batch between ranks itself: drop shard_by_rank()")
    return with_stage(self, BalanceRanks(batch_size, rank, world_size, tensors))

"""The source options of ``Dataset``: shard order, shards open at once, epochs, worker
processes, a cache's global shuffle, and each rank's part."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from beamtok._src.base.validate import check_choice, check_int
from beamtok._src.dataset.file_ranges import cut_for_readers
from beamtok._src.production.parallel import default_workers
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.ranks.equal_counts import EVEN_MODES
from beamtok._src.stream.ranks.reader_split import SPLIT_MODES, ReaderSplit
from beamtok._src.stream.roots.global_shuffle import GlobalShuffleRoot
from beamtok._src.stream.roots.shards import shard_root

__all__ = ["SourceOptions"]

D = TypeVar("D", bound="SourceOptions")


class SourceOptions:
    """The source options of ``Dataset`` (which holds ``_pipeline``)."""

    _pipeline: Pipeline

    if TYPE_CHECKING:

        def _replace(self: D, **changes: Any) -> D: ...  # Dataset's

        def _with_root_options(self: D, **changes: Any) -> D: ...  # Dataset's

    def shuffle_shards(self: D, seed: int) -> D:
        """Shuffle the shard order, differently each epoch, with ``seed``.

        Args:
            seed: The seed of each epoch's order.
        Returns:
            A new Dataset.
        """
        return self._with_root_options(shuffle_seed=seed)

    def interleave(self: D, open_shards: int) -> D:
        """Read ``open_shards`` shards at once, one example from each in turn.

        Args:
            open_shards: Shards read at once.
        Returns:
            A new Dataset.
        """
        return self._with_root_options(interleave=open_shards)

    def repeat(self: D, epochs: int | None = None) -> D:
        """Go over the shards ``epochs`` times (None: forever).

        Args:
            epochs: Passes over the shards (None: forever).
        Returns:
            A new Dataset.
        """
        return self._with_root_options(epochs=epochs)

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
        return self._with_root_options(workers=default_workers() if workers is None else workers)

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
            shard_root(self._pipeline.root, "global_shuffle()"), seed, window, local_copy, spread, unit_rows
        )
        return self._replace(root=root)

    def shard_by_rank(
        self: D, rank: int, world_size: int, *, split: str = "shards", even: str | None = None, loader_workers: int = 0
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
            cut_for_readers(self._pipeline.root, readers, f"world_size={world_size} x workers={max(1, loader_workers)}")
            if split == "shards"
            else self._pipeline.root
        )
        return self._replace(root=root, reader=ReaderSplit(rank, world_size, mode=split), even=even)

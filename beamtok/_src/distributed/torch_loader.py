"""A data loader for ``torch.distributed`` jobs, saved in the job's own DCP checkpoint and
resumed on any world size.

:class:`DistributedLoader` reads this rank's part of a beamtok dataset through torchdata's
``StatefulDataLoader`` (any ``num_workers``) and is a
``torch.distributed.checkpoint.stateful.Stateful``: put it in the state dict handed to
``dcp.save`` / ``dcp.load`` beside the model and the optimizer::

    loader = DistributedLoader(ds, num_workers=2)           # rank and world from the process group
    state = {"model": model, "optim": optimizer, "data": loader}
    dcp.load(state, checkpoint_id=newest)                   # on a restart, at any world size
    for batch in loader: ...
    dcp.save(state, checkpoint_id=next_dir)                 # every rank calls it, as DCP requires

Why the states are gathered at save time. DCP keeps one copy of a non-tensor value that several
ranks save under one key (it takes them for replicas), so a per-rank state must live under a
per-rank key; but a restart on another world size needs *every* old rank's state on every new
rank, and DCP asks a ``Stateful`` which keys to read before it reads anything, when the old
world size is not known yet. So ``state_dict()`` gathers every rank's state (one
``all_gather_object`` on the loader's process group) into one value that is the same on every
rank: DCP writes it once, every rank of any later world size reads it whole. A run on the same
world size with the same ``num_workers`` resumes each rank from its own entry through
``StatefulDataLoader.load_state_dict``: an exact continuation. Any other layout gathers the
readers' states with ``beamtok.reader_states`` and each new rank (and worker) resumes its share
of what the old readers left (``beamtok._src.stream.ranks.elastic``).

The cost grows with the world: a rank's entry is its loader's state (about 1-2 KB of JSON per
DataLoader worker for a plain stream, compressed about 3x). docs/architecture.md works out the
figures at 1,024 and 8,192 ranks.

What is refused, by name: a checkpoint without this loader's key (``dcp.load`` with
``allow_partial_load=True`` would otherwise leave the loader at the start without a word), a
value of another format, a rank missing or given twice, and (by the state checks of the stream
itself) states of another pipeline.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from beamtok._src.base.extras import missing_extra

try:
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint.stateful import Stateful
    from torch.distributed.device_mesh import DeviceMesh
except ImportError as error:
    raise ModuleNotFoundError(
        missing_extra("beamtok._src.distributed.torch_loader", "torch", "torchdata") or str(error)
    ) from None

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.validate import check_choice
from beamtok._src.distributed.rank_end_agreement import LOADER_EVEN_MODES, evened
from beamtok._src.distributed.rank_states import RankStates, pack_rank_states, unpack_rank_states
from beamtok._src.stream.ranks.elastic import reader_states
from beamtok._src.stream.stateful_loader import StatefulLoader

if TYPE_CHECKING:
    from beamtok._src.dataset.dataset import Dataset

__all__ = ["DistributedLoader"]

log = logging.getLogger(__name__)


class DistributedLoader(Stateful):
    """This rank's share of ``dataset`` through a ``StatefulDataLoader``; a DCP ``Stateful``
    whose state holds every rank's position.

    ``dataset``: a beamtok ``Dataset``, split here with ``shard_by_rank(rank, world_size,
    split=split, loader_workers=num_workers)`` (files fewer than the readers are cut into
    ranges). ``split="auto"`` (the default) splits by shards where every reader gets one, and
    otherwise by examples (a cache of fewer shards than readers: every reader reads each row and
    keeps its share); a resume keeps the split its states were saved with, whatever the new
    world size, so states of one run always merge. Or ``dataset`` is
    a function ``(rank, world_size) -> Dataset`` for pipelines that take the rank
    themselves (``balance_ranks``). ``rank``/``world_size`` default to ``group``'s: the
    data-parallel ranks the data is split over and the states are gathered from (the default
    group; with tensor or pipeline parallelism, the data-parallel group, or the data-parallel
    dimension of a ``DeviceMesh`` such as ``mesh["dp"]``: the ranks of one data-parallel rank
    then read the same batches). Other keyword
    arguments go to the ``StatefulDataLoader`` (``batch_size=None`` is the default: beamtok
    batches itself).

    ``even`` ends every rank at the same step, so none waits for ever in an all-reduce at the
    end of the data: ``"drop"`` (the default) stops every rank when one has no batch left,
    ``"pad"`` hands padding batches (no loss) to ranks that have none while any rank has one,
    ``None`` lets each rank read its whole share. Ranks agree with one all-reduce of an integer
    a batch (``beamtok._src.distributed.rank_end_agreement``), so it holds for any data and on any world
    size after a resume."""

    def __init__(
        self,
        dataset: Dataset | Callable[[int, int], Dataset],
        *,
        split: str = "auto",
        even: str | None = "drop",
        num_workers: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        group: Any = None,
        **loader_options: Any,
    ) -> None:
        """See the class docstring for what each choice does.

        Args:
            dataset: A Dataset, or a function ``(rank, world_size) -> Dataset``.
            split: ``"shards"``, ``"examples"`` or ``"auto"``: how the data is split over the readers (see above).
            even: ``"drop"``, ``"pad"`` or None (see above).
            num_workers: DataLoader workers a rank.
            rank: This rank (None: the group's).
            world_size: The ranks (None: the group's).
            group: The data-parallel process group, or a one-dimensional ``DeviceMesh`` (None: the default
                group).
            **loader_options: Passed to the ``StatefulDataLoader``.
        Raises:
            ConfigError: The data cannot be split over the readers, or an option is invalid (before any worker
                starts).
        """
        distributed = dist.is_available() and dist.is_initialized()
        if isinstance(group, DeviceMesh):
            if group.ndim != 1:
                raise ConfigError(
                    f"group: a DeviceMesh of one dimension (the data-parallel one, e.g. mesh['dp']), not {group.ndim} ({group.mesh_dim_names})"
                )
            group = group.get_group()
        self.group = group
        self.rank = rank if rank is not None else (dist.get_rank(group) if distributed else 0)
        self.world_size = world_size if world_size is not None else (dist.get_world_size(group) if distributed else 1)
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ConfigError(f"num_workers must be a whole number >= 0, got {num_workers!r}")
        check_choice(split, "split", ("auto", "shards", "examples"))
        if even is not None:
            check_choice(even, "even", LOADER_EVEN_MODES)
            if self.world_size > 1 and not distributed:
                raise ConfigError(
                    f"even={even!r} agrees with the other ranks at every step, which needs torch.distributed initialized (or even=None)"
                )
        self.even = even if self.world_size > 1 else None
        self._per_rank = callable(dataset) and not hasattr(
            dataset, "pipeline"
        )  # a function (rank, world_size) -> Dataset
        self._source = dataset
        self.split = split
        self.num_workers = num_workers
        if self._per_rank:
            self.dataset: Dataset = dataset(self.rank, self.world_size)  # type: ignore[operator]
        else:
            self.dataset = self._split_by(split)
        # every rank reads the whole stream and keeps its share (balance_ranks): any rank's state resumes all
        self._replica = self.world_size > 1 and self.dataset.pipeline.reader.world_size == 1
        self.loader_options = {"batch_size": None, **loader_options}
        self._loader: StatefulLoader | None = None
        self._loaded: RankStates | None = None  # a checkpoint's states, applied when the loader is built
        self._returned: bytes | None = None  # the blob state_dict() last gave DCP (which loads into that dict in place)

    # ------------------------------------------------------------------ reading

    @property
    def loader(self) -> StatefulLoader:
        """The ``StatefulDataLoader`` (built on first use, from the loaded state if any)."""
        if self._loader is None:
            self._loader = self._build()
        return self._loader

    def __iter__(self) -> Iterator[Any]:
        if self.even is None:
            return iter(self.loader)
        where = f"rank {self.rank} of {self.world_size}"
        return evened(
            iter(self.loader), self.even, self._agree, self.dataset.pipeline.root.pad_id, self._template, where
        )

    @property
    def _live_iterator(self) -> Any:
        """The ``StatefulDataLoader``'s current iterator (None before the first read), which
        holds the workers and the positions ``state_dict()`` reports."""
        return getattr(self._loader, "_iterator", None)

    def close(self) -> None:
        """Stop this rank's DataLoader workers now; ``state_dict()`` still gives the state after
        the last batch handed out, and a new iteration starts new workers.

        Without it the workers stop when the loader is garbage-collected. Inside a reference
        cycle (a trainer's objects usually hold one) the collector finalizes the worker queues
        before the loader, so each worker misses the stop message and is waited on for 5 s.
        """
        shutdown = getattr(self._live_iterator, "_shutdown_workers", None)  # only a multi-process one has workers
        if shutdown is not None:
            shutdown()

    @functools.cached_property
    def _agree_device(self) -> torch.device:
        """Where the agreement's integer lives: the rank's GPU on NCCL, else the CPU."""
        return (
            torch.device("cuda", torch.cuda.current_device())
            if dist.get_backend(self.group) == "nccl"
            else torch.device("cpu")
        )

    def _agree(self, flag: int, any_rank: bool) -> int:
        """``flag`` reduced over the group: the max (``any_rank``) or the min."""
        value = torch.tensor([flag], dtype=torch.int32, device=self._agree_device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX if any_rank else dist.ReduceOp.MIN, group=self.group)
        return int(value.item())

    def _template(self) -> Any:
        """An item of the whole dataset as the loader hands it out, to shape padding after (a
        rank that has read nothing in this run)."""
        from torch.utils.data import default_convert

        whole: Dataset = self._source(0, 1) if self._per_rank else self._source  # type: ignore[operator,assignment]
        with whole.iter() as it:
            return default_convert(next(it))

    def _split_by(self, split: str) -> Dataset:
        """This rank's share of the whole dataset, split by ``split`` (``"auto"``: by shards
        where there are enough for every reader, else by examples)."""
        whole: Dataset = self._source  # type: ignore[assignment]
        if split != "auto":
            return whole.shard_by_rank(self.rank, self.world_size, split=split, loader_workers=self.num_workers)
        try:
            return whole.shard_by_rank(self.rank, self.world_size, split="shards", loader_workers=self.num_workers)
        except ConfigError as refused:
            log.info("%s; reading by examples instead (split='auto')", refused)
            return whole.shard_by_rank(self.rank, self.world_size, split="examples", loader_workers=self.num_workers)

    def _build(self) -> StatefulLoader:
        saved = self._loaded
        if saved is not None and self.split == "auto" and not self._per_rank:
            saved_mode = next((s["split"].get("mode") for s in reader_states(*saved.loader_states)), None)
            if saved_mode in ("shards", "examples") and saved_mode != self.dataset.pipeline.reader.mode:
                self.dataset = self._split_by(saved_mode)  # the states merge only into the split they were saved by
        exact = saved is not None and saved.same_layout(self.world_size, self.num_workers)
        resume = reader_states(*saved.loader_states) if saved is not None and not exact else None
        adapter = self.dataset.to_torch(resume_from=resume)
        if resume is not None:
            adapter.check_resume(self.num_workers)  # refused here, before any worker starts
        loader = StatefulLoader(adapter, num_workers=self.num_workers, **self.loader_options)
        if exact:
            assert saved is not None
            loader.load_state_dict(saved.entries[self.rank]["loader"])  # this rank's own state: exact
        return loader

    # ------------------------------------------------------------- checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Every rank's state, gathered (a collective: every rank of the group calls it, as
        ``dcp.save`` does)."""
        if self._loader is None and self._loaded is not None:
            # loaded and not read since: the checkpoint's states still say where every reader is
            packed = pack_rank_states(list(self._loaded.entries))
        else:
            own = {
                "rank": self.rank,
                "num_workers": self.num_workers,
                "replica": self._replica,
                "loader": self._loader_state(),
            }
            packed = pack_rank_states(self._gather(own))
        self._returned = packed["states"]
        return packed

    def _loader_state(self) -> dict[str, Any]:
        """This rank's ``StatefulDataLoader`` state: after every batch handed out."""
        return self.loader.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Every old rank's state, from a checkpoint of any world size; applied when the loader
        is next built (a loader already reading starts again from it).

        Args:
            state_dict: What ``state_dict()`` returned, from a run of any world size.
        Raises:
            StateError: The checkpoint holds no beamtok state under this loader's key.
        """
        # DCP loads into the dict state_dict() returned: a value it did not read is still the very object given
        if self._returned is not None and isinstance(state_dict, dict) and state_dict.get("states") is self._returned:
            raise StateError(
                "the checkpoint holds no beamtok data state under this loader's key (dcp.load with allow_partial_load "
                "left the loader's own value in place): resuming would restart the data; save the loader in the checkpoint "
                "or leave it out of the state dict to start the data afresh"
            )
        self._loaded = unpack_rank_states(state_dict)
        self._loader = None

    def _gather(self, own: dict[str, Any]) -> list[dict[str, Any]]:
        if self.world_size == 1:
            return [own]
        if not (dist.is_available() and dist.is_initialized()):
            raise ConfigError(
                f"a loader of rank {self.rank} of {self.world_size} saves every rank's state, which needs torch.distributed initialized"
            )
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, own, group=self.group)
        return gathered

"""A loader for torchft: replica groups that leave and rejoin mid-run, and every batch trained once.

Under torchft a job keeps training while replica groups die and come back; each step a quorum
says who takes part. A loader that gives each group a fixed share (torchft's own
``DistributedSampler``) loses a dead group's share and repeats or drops batches around a
rejoin. :class:`TorchftLoader` instead reads one global stream of batches (the dataset as one
reader sees it) and hands out its items by the step's quorum:

- the position is torchft's own count of committed batches, ``manager.batches_committed()``:
  the batches of every committed step, summed over that step's participants. torchft keeps it,
  moves it +participants on each commit only, saves it in ``manager.state_dict()`` and hands it
  to a healing group with the weights, so the position is always that of the last committed
  step and the same on every group that takes part;
- participant ``r`` of ``n`` reads global batch ``cursor + r``; within a group of ``w`` ranks,
  rank ``j`` reads item ``(cursor + r) * w + j`` of the stream;
- a step torchft does not commit moves nothing: its batches go to the next quorum, whoever is
  in it; a healing group (not participating) reads nothing;
- the end of the data is agreed through the step's all-reduce: a rank that meets the end adds
  its length to a two-number sum, so every group learns it in the same step and
  :attr:`finished` turns true on all of them after the same commit. In groups of several ranks,
  the group's own ranks first share it over the default process group (the cross-group
  all-reduce joins only the ranks of one number).

A seek is free on a cache read in order (``it.seeks``); elsewhere (files tokenized on the fly, a
mix) reaching batch ``cursor + r`` reads the other participants' batches first. Build a cache
for large jobs.
"""

from __future__ import annotations

import warnings
from typing import Any

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.extras import missing_extra
from beamtok._src.base.validate import check_int

try:
    import torch
    import torch.distributed as dist
except ImportError as error:
    raise ModuleNotFoundError(missing_extra("beamtok._src.distributed.torchft_loader", "torch") or str(error)) from None

__all__ = ["STATE_KEY", "TorchftLoader", "torchft_version_warning"]

STATE_KEY = "beamtok"
"""The key the loader's state is registered under with ``Manager.register_state_dict_fn``."""

RESTARTING_DDP_VERSIONS = ("0.1.", "0.2.")
"""torchft releases whose ``DistributedDataParallel`` wrapper fails the surviving groups when a
peer dies inside an all-reduce (a bare assertion in its comm hook): under ``torchrun
--max-restarts`` every group restarts and the job trains from step 0 again."""


def torchft_version_warning(version: str) -> str | None:
    """The warning for a torchft whose DDP wrapper restarts the job on a peer's death; None for
    other versions. (``import torchft`` imports the wrapper too, so its use cannot be seen.)

    Args:
        version: torchft's distribution version.
    """
    if not version.startswith(RESTARTING_DDP_VERSIONS):
        return None
    return (
        f"torchft {version}: if the model is wrapped in torchft.DistributedDataParallel, a peer dying inside an "
        "all-reduce fails the surviving replica groups and torchrun restarts the whole job from step 0; reduce "
        "gradients with manager.allreduce(p.grad) per parameter instead (docs/fault-tolerance.md)"
    )


class TorchftLoader:
    """This rank's batch of each torchft step, handed out by the step's quorum.

    Args:
        dataset: The global stream of batches, as one reader sees it (no ``shard_by_rank``):
            a ``Dataset`` ending in ``batch(...)``, the same on every group.
        manager: This rank's ``torchft.Manager``, made with ``init_sync=False`` (seed the
            model identically on every group instead).
        group_rank: This rank within its replica group.
        group_world_size: Ranks in each replica group (the same in every group).

    Raises:
        ConfigError: The manager was made with ``init_sync=True``, or the dataset is split
            by rank, or the group's rank and size disagree.
    """

    def __init__(self, dataset: Any, manager: Any, *, group_rank: int = 0, group_world_size: int = 1) -> None:
        self._width = check_int(group_world_size, "group_world_size")
        self._rank = check_int(group_rank, "group_rank")
        if self._width < 1 or self._rank >= self._width:
            raise ConfigError(f"TorchftLoader: group rank {group_rank} of {group_world_size} ranks does not exist")
        if getattr(manager, "_init_sync", False):
            raise ConfigError(
                "TorchftLoader needs Manager(init_sync=False): with init_sync at step 0 torchft zeroes the gradients "
                "of every group but the first yet counts their batches as trained; seed the model identically instead"
            )
        split = dataset.pipeline.reader
        if split.world_size != 1:
            raise ConfigError(
                "TorchftLoader reads the whole stream and deals it by the quorum: pass the dataset without "
                f"shard_by_rank (it is split {split.rank} of {split.world_size})"
            )
        if self._width > 1 and not (dist.is_initialized() and dist.get_world_size() == self._width):
            raise ConfigError(
                f"TorchftLoader(group_world_size={self._width}) agrees the end of the data within the group over the "
                "default process group: start it first, one per replica group (beamtok.training.start_process_group())"
            )
        self._dataset = dataset
        self._manager = manager
        self._iterator: Any = None
        self._length: int | None = None  # items in the stream, once a rank has met its end
        self._heard: tuple[int, int] | None = None  # (step, length) an all-reduce told, believed once committed
        self.last_read: int | None = None
        """The stream item the last :meth:`next_batch` returned (None: it returned None)."""
        import torchft  # noqa: F401  (the integration's dependency, named in the error when missing)

        message = torchft_version_warning(_torchft_version())
        if message:
            warnings.warn(message, stacklevel=2)
        manager.register_state_dict_fn(STATE_KEY, self.load_state_dict, self.state_dict)

    @property
    def cursor(self) -> int:
        """Global batches (one per participant and step) used by committed steps so far."""
        return int(self._manager.batches_committed())

    @property
    def finished(self) -> bool:
        """Whether every batch of the stream has been used by a committed step (the same on
        every group: the end is learnt in a step's all-reduce)."""
        length = self._learnt_length()
        return length is not None and self.cursor * self._width >= length

    def next_batch(self) -> Any | None:
        """This rank's batch for the current step, after the step's quorum (call it after
        the optimizer wrapper's ``zero_grad()`` started it). None where this group heals, or
        where its share lies past the end of the data: still take part in the step's
        all-reduce, with zero gradients.

        Returns:
            The batch, or None.
        """
        self._learnt_length()  # what the last step's all-reduce told, if that step committed
        participant = self._manager.participating_rank()
        batch = None
        self.last_read = None
        if participant is not None and self._manager.is_participating():
            item = (self.cursor + participant) * self._width + self._rank
            batch = self._read(item)
            if batch is not None:
                self.last_read = item
        self._share_length()
        return batch

    def _read(self, item: int) -> Any | None:
        """Stream item ``item``: read on from where this rank is, or sought afresh where it
        lies behind (a step that was not committed, a group that healed); None past the end."""
        length = self._learnt_length()
        if length is not None and item >= length:
            return None
        it = self._iterator
        if it is None or it.step > item:
            it = self._iterator = self._seek(item)
            if it is None:
                return None
        if it.step < item:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a skip that meets the end says so: here that is the news
                it.skip(item - it.step)
            if it.step < item:
                self._length = it.step
                return None
        try:
            return next(it)
        except StopIteration:
            self._length = item
            return None

    def _seek(self, item: int) -> Any | None:
        """An iterator at ``item`` (no replay where the stream seeks), or None where the stream
        ends before it, its length then learnt."""
        try:
            return self._dataset.iter_at(item)
        except ConfigError:
            it = self._dataset.iter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                it.skip(item)
            self._length = it.step
            return None

    def _share_length(self) -> None:
        """The all-reduce that makes the end of the data known to every group at once. What it
        tells is believed only once the step commits: a failed all-reduce leaves any numbers."""
        known = torch.tensor(
            [1.0, float(self._length)] if self._length is not None else [0.0, 0.0], dtype=torch.float64
        )
        if self._width > 1:  # the group's ranks first: each then tells the other groups' rank alike
            mine = torch.tensor([-1.0 if self._length is None else float(self._length)], dtype=torch.float64)
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
            if mine.item() >= 0 and self._length is None:
                self._length = int(mine.item())
                known = torch.tensor([1.0, float(self._length)], dtype=torch.float64)
        step = int(self._manager.current_step())
        self._manager.allreduce(known, reduce_op=dist.ReduceOp.SUM).wait()
        told, total = float(known[0]), float(known[1])
        if self._length is None and told >= 1 and total / told == int(total / told):
            self._heard = (step, int(total / told))

    def _learnt_length(self) -> int | None:
        """The stream's length, where this rank met the end or a committed step told it."""
        if self._length is None and self._heard is not None:
            step, length = self._heard
            now = self._manager.current_step()
            if now == step + 1:  # that step committed here (a heal jumps further: its numbers are not trusted)
                self._length = length
            if now != step:
                self._heard = None
        return self._length

    def state_dict(self) -> dict[str, Any]:
        """What a healing group checks against its own: the stream and the group width (the
        position itself is torchft's ``batches_committed``, which it hands over too).

        Returns:
            ``{"stream": ..., "group_world_size": ..., "batches_committed": ...}``.
        """
        return {
            "stream": self._dataset.pipeline.stream_fingerprint_for(1),
            "group_world_size": self._width,
            "batches_committed": self.cursor,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A peer's state, at a heal: refused where it reads another stream or groups of
        another width (their batch numbers would mean other rows).

        Args:
            state: What :meth:`state_dict` returned on the peer.
        Raises:
            StateError: The peer reads another stream, or its groups have another width.
        """
        own = self.state_dict()
        for key in ("stream", "group_world_size"):
            if state.get(key) != own[key]:
                raise StateError(
                    f"TorchftLoader: the healing peer's {key} is {state.get(key)!r}, this group's is {own[key]!r}: "
                    "every replica group must read the same dataset with the same number of ranks"
                )


def _torchft_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for name in ("torchft", "torchft-nightly"):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return ""

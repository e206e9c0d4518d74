"""A torch IterableDataset over a beamtok Dataset, checkpointable with StatefulDataLoader.

Use it as ``torchdata.stateful_dataloader.StatefulDataLoader(ds.to_torch(), batch_size=None,
num_workers=N)`` (beamtok batches itself): the loader asks each worker's copy of this
dataset for its ``state_dict()`` and hands it back through ``load_state_dict()``, so
``loader.state_dict()`` / ``loader.load_state_dict()`` resume exactly for any N. Each worker
reads its own share of the shards. To resume on another world size or worker count, gather
every old reader's state with ``beamtok.reader_states`` and pass it to
``to_torch(resume_from=...)``.

A plain ``torch.utils.data.DataLoader`` with workers iterates copies of this object in other
processes, so the copy in the training process cannot know where they are: its
``state_dict()`` then refuses instead of returning a wrong state. With ``num_workers=0`` it
is exact.

Where DataLoader workers are forked (Linux's default), the fast-path encoders of the
tokenizers the readers will encode with are built in this process when the adapter is made,
so every forked worker starts with them built instead of building its own before its first
batch (``benchmarks/worker_start.py`` measures it).

A dataset with a ``.batch()`` stage yields whole batches. A DataLoader left at its default
``batch_size=1`` hands each one to ``default_collate`` in a list of one, which would add a
leading dimension of 1: that case passes the batch through unchanged. Any other
``batch_size`` would stack several batches into one, and is refused with the fix.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from typing import Any, Protocol

import torch.utils.data

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.parent_death import die_with_parent
from beamtok._src.core.spec import build_encoders
from beamtok._src.production.workers import as_dataloader_worker
from beamtok._src.stream.iterator import DatasetIterator
from beamtok._src.stream.one_buffer import in_one_buffer
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.roots.base import RootPlan
from beamtok._src.stream.stages.collate import Batched
from beamtok._src.stream.state import IteratorState

__all__ = ["TorchIterableDataset"]


class Iterated(Protocol):
    """What the adapter needs of a ``beamtok.Dataset``: iterators that start from a state."""

    @property
    def pipeline(self) -> Pipeline: ...

    def iter(self, state: dict[str, Any] | None = None) -> DatasetIterator: ...

    def iter_merged(self, states: list[dict[str, Any]]) -> DatasetIterator: ...


class TorchIterableDataset(torch.utils.data.IterableDataset):
    def __init__(self, dataset: Iterated) -> None:
        super().__init__()
        self.dataset = dataset
        self._iterator: DatasetIterator | None = None
        self._pending_state: dict[str, Any] | list[dict[str, Any]] | None = None
        self._history: dict[int, IteratorState] | None = None  # count of items yielded -> state after them
        self._count = 0
        # Set by a DataLoader worker's copy; shared memory, so this process sees it.
        self._iterated_in_worker = multiprocessing.Value("b", 0, lock=False)
        if _forks_workers():
            for root in _read_roots(dataset.pipeline.root):
                build_encoders(root.spec)

    def __iter__(self) -> Iterator[Any]:
        if torch.utils.data.get_worker_info() is not None:
            self._iterated_in_worker.value = 1
            die_with_parent()  # a worker of a killed training process would otherwise wait on its queues for good
        if self._iterator is not None:
            self._iterator.close()
        self._iterator = _resumed(self.dataset, self._pending_state)
        self._pending_state = None
        items: Iterator[Any] = self._iterator if self._history is None else self._recording(self._iterator)
        if torch.utils.data.get_worker_info() is not None:  # each batch crosses to the trainer in one buffer
            return map(in_one_buffer, items)
        return items

    def check_resume(self, num_workers: int, states: list[dict[str, Any]] | None = None) -> None:
        """Build, without reading, the iterator each of ``num_workers`` DataLoader workers
        will start from, so a state that does not fit this pipeline is refused in this
        process, as one ``StateError``, before any worker starts.

        Args:
            num_workers: The loader's workers (0: this process reads).
            states: Each worker's own state (a resume with the same workers); None: what
                :meth:`load_state_dict` was given, which every worker starts from.
        Raises:
            StateError: A state belongs to another pipeline or split, or is malformed.
        """
        workers = max(1, num_workers)
        own: dict[int, dict[str, Any]] = {}
        for state in states or []:
            split = state.get("split") if isinstance(state, dict) else None
            worker = split.get("worker") if isinstance(split, dict) else None
            own[worker if isinstance(worker, int) and 0 <= worker < workers else len(own) % workers] = state
        for worker in range(workers):
            start = own.get(worker) if states is not None else self._pending_state
            if start is None:
                continue
            with as_dataloader_worker(worker, workers):
                _resumed(self.dataset, start).close()

    def record_states(self) -> None:
        """Keep the state after every item yielded in this process, by the running count of
        items (see :meth:`state_after`): for loaders that fetch ahead of the training step."""
        if self._history is None:
            self._history = {}

    def recorded(self) -> bool:
        """Whether this process has recorded a state (it iterated the dataset since
        :meth:`record_states`)."""
        return bool(self._history)

    def start_count(self, count: int) -> None:
        """Number the next item yielded ``count + 1`` (after resuming at ``count`` consumed)."""
        self._count = count

    def state_after(self, count: int) -> IteratorState:
        """The state after the first ``count`` items yielded (counted across passes), and
        forget older ones."""
        if self._history is None or count not in self._history:
            have = sorted(self._history or ())
            raise StateError(
                f"no state recorded after item {count} (recorded: {have[0] if have else '-'}..{have[-1] if have else '-'}); "
                "was the dataset iterated in this process, by one loader?"
            )
        for old in [c for c in self._history if c < count]:
            del self._history[old]
        return self._history[count]

    def _recording(self, iterator: DatasetIterator) -> Iterator[Any]:
        assert self._history is not None
        self._history[self._count] = iterator.state_dict()
        for item in iterator:
            self._count += 1
            self._history[self._count] = iterator.state_dict()
            yield item

    def state_dict(self) -> IteratorState | dict[str, Any]:
        """The state of this process's iterator (the start, or the state loaded, before one)."""
        if self._iterator is not None:
            return self._iterator.state_dict()
        if self._iterated_in_worker.value and torch.utils.data.get_worker_info() is None:
            raise StateError(
                "this dataset is iterated in DataLoader worker processes, so its copy here cannot know their "
                "positions; use torchdata's StatefulDataLoader (loader.state_dict()), or DataLoader(num_workers=0) "
                "with ds.parallel(n) for tokenization workers"
            )
        # builds the stages only: nothing is read or started
        if isinstance(self._pending_state, dict):
            return self._pending_state
        return _resumed(self.dataset, self._pending_state).state_dict()

    def load_state_dict(self, state_dict: dict[str, Any] | list[dict[str, Any]]) -> None:
        """This reader's state, or every reader state of a run on another split (a list)."""
        self._pending_state = state_dict

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_iterator"] = None
        if not _spawning():  # a copy that is not a new worker (deepcopy, pickle to disk) gets a flag of its own
            state["_iterated_in_worker"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._iterated_in_worker is None:
            self._iterated_in_worker = multiprocessing.Value("b", 0, lock=False)


def _forks_workers() -> bool:
    """Whether worker processes started without naming a start method are forked here (the
    start method set for this program, else the platform's default), without fixing it."""
    return (multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]) == "fork"


def _read_roots(root: RootPlan) -> list[RootPlan]:
    """The roots whose shards the readers process (a mix's sources, at any depth); a cache
    is read as it was written, with no step of its spec run again."""
    if root.sources != (root,):
        return [leaf for source in root.sources for leaf in _read_roots(source)]
    return [] if root.cached else [root]


def _collate_batched(batch: list[Batched], *, collate_fn_map: Any = None) -> Batched:
    """default_collate for beamtok's own batches: one passes through, several are refused."""
    if len(batch) == 1:
        return torch.utils.data.default_convert(batch[0])  # as with batch_size=None: numpy arrays become tensors
    raise ConfigError(
        f"the DataLoader batches {len(batch)} of beamtok's batches together, but the dataset already batches "
        "(.batch(n)): create the loader with batch_size=None, or drop .batch() and let the loader batch examples"
    )


def _register_collate() -> None:
    # default_collate looks an element's type up in this map before its generic dict branch;
    # the map is torch's documented hook for custom types (torch >= 2.0).
    from torch.utils.data._utils import collate as torch_collate

    registry = getattr(torch_collate, "default_collate_fn_map", None)
    if isinstance(registry, dict):
        registry[Batched] = _collate_batched


_register_collate()


def _spawning() -> bool:
    from multiprocessing import context

    return context.get_spawning_popen() is not None


def _resumed(dataset: Iterated, saved: dict[str, Any] | list[dict[str, Any]] | None) -> DatasetIterator:
    """``dataset``'s iterator from what a loader state held: nothing, this reader's state, or
    every reader's states of another split."""
    return dataset.iter_merged(saved) if isinstance(saved, list) else dataset.iter(saved)

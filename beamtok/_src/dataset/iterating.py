"""The iterators a Dataset hands out: fresh or resumed from this reader's state (``iter``),
resumed from every reader's states of a run on another world size (``iter_merged``), or started
at a step or, on a packed cache, at a global example (``iter_at``); and the torch adapter that
makes them in DataLoader workers (``to_torch``)."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, cast

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.extras import require
from beamtok._src.base.validate import check_int
from beamtok._src.dataset.file_ranges import cut_as_saved
from beamtok._src.dataset.old_calls import todays_call
from beamtok._src.dataset.stage_adding import D, replaced
from beamtok._src.stream.iterator import DatasetIterator
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.ranks.reader_split import ReaderSplit

__all__ = ["iter", "iter_at", "iter_merged", "iterator_at", "saved_iterator", "to_torch"]


def saved_iterator(pipeline: Pipeline, saved: dict[str, Any] | list[dict[str, Any]] | None) -> DatasetIterator:
    """A fresh iterator (``saved`` None), or one resumed from this reader's state or from every
    reader's states of another split (a list; the iterator merges them).

    Args:
        pipeline: The dataset's pipeline.
        saved: None, a state from ``state_dict()``, or a list of every old reader's state.
    """
    if saved is None:
        return DatasetIterator(pipeline, pipeline.reader_split())
    pipeline = dataclasses.replace(pipeline, root=cut_as_saved(pipeline.root, saved))
    return DatasetIterator(pipeline, pipeline.reader_split(), saved)


def iterator_at(pipeline: Pipeline, step: int | None = None, example: int | None = None) -> DatasetIterator:
    """An iterator whose first item is this reader's step ``step``, or (a packed cache) one that
    starts at global example ``example`` of the source.

    Args:
        pipeline: The dataset's pipeline.
        step: This reader's step (the item ``skip(step)`` would reach).
        example: A global example of the source (packed caches: it needs the manifest's counts).
    """
    if (step is None) == (example is None):
        raise ConfigError("iter_at() takes one of step and example")
    split = pipeline.reader_split()
    if step is not None:
        return _at_step(pipeline, split, check_int(step, "step"))
    it = DatasetIterator(pipeline, split)
    it.source.reset(it.source.state_at(check_int(example, "example")))
    return it


def _at_step(pipeline: Pipeline, split: ReaderSplit, step: int) -> DatasetIterator:
    """An iterator whose next item is step ``step``'s, or ConfigError naming this reader's last
    step where there is no such step (``step`` equal to the number of steps too)."""
    it = DatasetIterator(pipeline, split)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # said below, as an error
        passed = it.skip(step)
    there = None
    if passed == step:
        state = it.state_dict()
        try:
            next(it)  # is there a step ``step`` at all? (it is read again by the iterator returned)
            there = DatasetIterator(pipeline, split, state)
        except StopIteration:
            pass
    it.close()
    if there is not None:
        return there
    if passed == 0:
        raise ConfigError(f"iter_at(step={step}): this reader's stream has no step at all")
    raise ConfigError(
        f"iter_at(step={step}): this reader's stream has steps 0-{passed - 1}; step {step} is past its end"
    )


def iter(
    self: D,
    state: dict[str, Any] | None = None,
    *,
    state_dict: Any = None,
    start_example: int | None = None,
    step: int | None = None,
) -> DatasetIterator:
    """A fresh iterator, or one resumed from this reader's ``state`` (never mutated).
    Nothing is read and no worker starts before ``next()``; use the iterator as a context
    manager (or call ``close()``) to stop workers early.

    Args:
        state: A state from ``state_dict()`` of a reader of this split, or None.
        state_dict: Deprecated name of ``state`` (a list of states: use :meth:`iter_merged`).
        start_example: Deprecated: use ``iter_at(example=...)``.
        step: Deprecated: use ``iter_at(step)``.
    Returns:
        A DatasetIterator.
    Raises:
        StateError: The state belongs to another pipeline (the message names what changed) or is
            malformed.
    """
    if state_dict is not None or start_example is not None or step is not None or isinstance(state, list):
        call, value = todays_call(state, state_dict, start_example, step)
        if call == "iter_at_example":
            return iterator_at(self.pipeline, example=value)
        if call == "iter_at_step":
            return iterator_at(self.pipeline, step=value)
        state = value
    return saved_iterator(self.pipeline, state)


def iter_merged(self: D, states: list[dict[str, Any]]) -> DatasetIterator:
    """This reader's iterator resumed from every reader's state of a run on another world
    size or number of DataLoader workers (``beamtok.reader_states`` gathers them from
    checkpoints; docs/checkpoints.md says which changes a resume takes).

    Args:
        states: Every old reader's state.
    Returns:
        A DatasetIterator.
    Raises:
        StateError: The states belong to another pipeline, or a stage cannot be resumed on
            another world size.
    """
    if not isinstance(states, list):
        raise StateError(f"iter_merged() takes the list of every reader's state, not {type(states).__name__}")
    return saved_iterator(self.pipeline, states)


def iter_at(self: D, step: int | None = None, *, example: int | None = None) -> DatasetIterator:
    """An iterator whose first item is this reader's step ``step`` (what ``skip(step)`` on a
    fresh iterator reaches, without reading the steps before where ``it.seeks``), or, on a
    packed cache, one starting at global example ``example`` of the source.

    Args:
        step: This reader's step.
        example: A global example of the source (packed caches: it needs the manifest's row
            counts).
    Returns:
        A DatasetIterator.
    Raises:
        ConfigError: Both or neither given, or the step is past this reader's last.
    """
    return iterator_at(self.pipeline, step, example)


def to_torch(self: D, *, resume_from: list[dict[str, Any]] | None = None) -> Any:
    """A ``torch.utils.data.IterableDataset`` with ``state_dict()``/``load_state_dict()``,
    for torchdata's ``StatefulDataLoader`` (any number of workers).

    ``resume_from``: every reader state of a run with another world size or number of
    DataLoader workers (``beamtok.reader_states(*loader_state_dicts)`` gathers them from
    each old rank's ``loader.state_dict()``); each new worker of each new rank resumes
    its share of what they left.

    Args:
        resume_from: Every reader state of a run with another world size or number of DataLoader workers.
    Returns:
        A ``torch.utils.data.IterableDataset`` with ``state_dict()`` and ``load_state_dict()``.
    """
    require("to_torch()", "torch", "torchdata")
    from beamtok._src.stream.torch_dataset import Iterated, TorchIterableDataset

    dataset = self if resume_from is None else replaced(self, root=cut_as_saved(self.pipeline.root, resume_from))
    adapter = TorchIterableDataset(cast("Iterated", dataset))  # D is a Dataset, whose iter() it calls
    if resume_from is not None:
        adapter.load_state_dict(resume_from)
    return adapter

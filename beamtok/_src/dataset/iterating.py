"""The iterators a Dataset hands out: fresh or resumed from this reader's state, resumed from
every reader's states of a run on another world size, or started at a step (or, on a packed
cache, at a global example). ``Dataset.iter``, ``iter_merged`` and ``iter_at`` are one line
each over these."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.validate import check_int
from beamtok._src.dataset.file_ranges import cut_as_saved
from beamtok._src.stream.iterator import DatasetIterator
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.ranks.reader_split import ReaderSplit

__all__ = ["iterator_at", "merged_iterator", "saved_iterator"]


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


def merged_iterator(pipeline: Pipeline, states: list[dict[str, Any]]) -> DatasetIterator:
    """This reader's iterator from every reader's state of a run on another world size (or
    another number of DataLoader workers).

    Args:
        pipeline: The dataset's pipeline.
        states: Every old reader's state (``beamtok.reader_states`` gathers them).
    """
    if not isinstance(states, list):
        raise StateError(f"iter_merged() takes the list of every reader's state, not {type(states).__name__}")
    return saved_iterator(pipeline, states)


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

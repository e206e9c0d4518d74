"""``Dataset.iter`` as it was called before ``iter_merged`` and ``iter_at``: a ``state_dict=``
keyword, a list of every reader's states, ``start_example=`` or ``step=``. Each still works
for one release, with a DeprecationWarning naming the call that replaces it."""

from __future__ import annotations

import warnings
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.dataset.iterating import iterator_at, saved_iterator
from beamtok._src.stream.iterator import DatasetIterator
from beamtok._src.stream.pipeline import Pipeline

__all__ = ["old_iter_call"]


def old_iter_call(
    pipeline: Pipeline, state: Any, state_dict: Any, start_example: int | None, step: int | None
) -> DatasetIterator:
    """The iterator an old-style ``iter()`` call asked for.

    Args:
        pipeline: The dataset's pipeline.
        state: What was passed first (a state, a list of states, or None).
        state_dict: The old keyword's value.
        start_example: The old keyword's value.
        step: The old keyword's value.
    """
    if state_dict is not None:
        if state is not None:
            raise ConfigError("pass the state once: iter(state)")
        _deprecated("iter(state_dict=...) is now iter(state)")
        state = state_dict
    given = [
        name
        for name, value in (("a state", state), ("start_example", start_example), ("step", step))
        if value is not None
    ]
    if len(given) > 1:
        raise ConfigError(f"pass one of a state, start_example and step, not {' and '.join(given)}")
    if isinstance(state, list):
        _deprecated("iter(states) with every reader's states is now iter_merged(states)")
    if start_example is not None:
        _deprecated("iter_at(example=N) is now iter_at(example=N)")
        return iterator_at(pipeline, example=start_example)
    if step is not None:
        _deprecated("iter_at(N) is now iter_at(N)")
        return iterator_at(pipeline, step=step)
    return saved_iterator(pipeline, state)


def _deprecated(what: str) -> None:
    warnings.warn(f"{what}; the old call goes in the next release", DeprecationWarning, stacklevel=4)

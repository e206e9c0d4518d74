"""StatefulLoader: torchdata's ``StatefulDataLoader`` with the two things a resumed run of
beamtok data needs.

- **The end is the end.** torchdata treats a state saved after the last batch as the end of
  an epoch, and its next ``iter()`` starts the dataset again from the start. Over a finite
  beamtok dataset that would train the whole data a second time when a finished run is
  restarted from its last checkpoint. Here that first ``iter()`` yields nothing (and
  ``state_dict()`` still says the data is done); an ``iter()`` after it starts a new pass, as
  an epoch loop expects. A ``.repeat()`` dataset never ends, so it never meets this.
- **Refusals in this process.** ``load_state_dict`` builds (without reading) the iterator
  each worker will start from, so a state of another pipeline, ``seq_len`` or file is refused
  here as one ``StateError``, not as a traceback from inside a worker process.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from torchdata.stateful_dataloader import StatefulDataLoader

from beamtok._src.stream.ranks.elastic import reader_states
from beamtok._src.stream.torch_dataset import TorchIterableDataset

__all__ = ["StatefulLoader"]

FINISHED_KEY = "_iterator_finished"  # torchdata's flag: the state was taken after the last batch


class StatefulLoader(StatefulDataLoader):
    """A ``StatefulDataLoader`` over ``ds.to_torch()`` whose state taken at the end of the data
    resumes to nothing, and whose ``load_state_dict`` checks every worker's state at once.
    Takes ``StatefulDataLoader``'s arguments (``batch_size=None`` when the dataset batches).

    Args:
        *args: ``StatefulDataLoader``'s positional arguments (the dataset first).
        **kwargs: Its keyword arguments (``batch_size``, ``num_workers``...).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ended: dict[str, Any] | None = None  # a loaded state taken after the last batch
        self._pass_ended = False  # the next iter() is the rest of that finished pass: nothing

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from ``state_dict()`` of a loader with the same number of workers.

        Args:
            state_dict: What ``state_dict()`` returned.
        Raises:
            StateError: A worker's state belongs to another pipeline or split.
        """
        if isinstance(self.dataset, TorchIterableDataset) and state_dict:
            self.dataset.check_resume(self.num_workers, reader_states(state_dict))
        finished = isinstance(state_dict, dict) and bool(state_dict.get(FINISHED_KEY))
        super().load_state_dict(state_dict)
        self._ended = copy.deepcopy(state_dict) if finished else None
        self._pass_ended = finished

    def __iter__(self) -> Iterator[Any]:
        if self._pass_ended:
            self._pass_ended = False
            self.next_iter_state = None  # the pass after this one starts at the beginning
            return iter(())
        self._ended = None
        return super().__iter__()

    def state_dict(self) -> dict[str, Any]:
        """Where the loader is: after the last batch handed out (the loaded state, until a
        new pass starts)."""
        if self._ended is not None:
            return copy.deepcopy(self._ended)
        return dict(super().state_dict())

"""A torch IterableDataset over a beamtok Dataset, checkpointable like torchdata's nodes.

Use it with ``torch.utils.data.DataLoader(ds.to_torch(), batch_size=None)`` (beamtok batches
itself). Each DataLoader worker reads its own share of the shards. ``state_dict()`` is the
current iterator's state; ``load_state_dict()`` makes the next ``iter()`` resume from it, as
torchdata's ``StatefulDataLoader`` expects of a dataset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch.utils.data

from beamtok.stream.iterator import DatasetIterator

if TYPE_CHECKING:
    from beamtok.stream.dataset import Dataset

__all__ = ["TorchIterableDataset"]


class TorchIterableDataset(torch.utils.data.IterableDataset):
    def __init__(self, dataset: Dataset) -> None:
        super().__init__()
        self.dataset = dataset
        self._iterator: DatasetIterator | None = None
        self._pending_state: dict[str, Any] | None = None

    def __iter__(self) -> Iterator[Any]:
        self._iterator = self.dataset.iter(state_dict=self._pending_state)
        self._pending_state = None
        return self._iterator

    def state_dict(self) -> dict[str, Any]:
        if self._iterator is not None:
            return self._iterator.state_dict()
        if self._pending_state is not None:
            return self._pending_state
        return self.dataset.iter().state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending_state = state_dict

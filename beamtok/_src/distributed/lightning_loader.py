"""A data loader for PyTorch Lightning's ``Trainer`` that resumes exactly where the last
training step left off.

Lightning saves a stateful train loader in its checkpoint (``state_dict()`` when the checkpoint
is written, ``load_state_dict()`` on ``fit(ckpt_path=...)``), but its training loop fetches one
batch ahead of the step it runs, to know whether that step is the last. A loader asked for its
state at a checkpoint has therefore already handed out a batch no step has trained on, and a
resume from that state never trains on it: one batch lost at every resume. (torchdata's
``StatefulDataLoader`` under Lightning loses it the same way.)

:class:`LightningLoader` keeps its state after each of the last batches it handed out and
saves the one the trainer has consumed: ``fetched_ahead`` batches before the newest (Lightning's
training loop: 1), or the newest once the data has run out (the trainer then has no batch in
hand). Everything else is ``beamtok._src.distributed.torch_loader.DistributedLoader``: any number
of DataLoader workers, and under a DDP strategy every rank's state gathered into the checkpoint,
so it resumes on any number of devices. When a fit ends, Lightning resets its train loader, and
the workers stop then (``DistributedLoader.close``), not at some later garbage collection.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.distributed.torch_loader import DistributedLoader

__all__ = ["LightningLoader"]


class LightningLoader(DistributedLoader):
    """``DistributedLoader`` whose saved state is the batch the trainer last consumed, not the
    one its training loop fetched ahead. Return it from ``train_dataloader()``."""

    def __init__(self, dataset: Any, *, fetched_ahead: int = 1, **options: Any) -> None:
        """A loader for this rank of the process group (if any).

        Args:
            dataset: A Dataset, or a function ``(rank, world_size) -> Dataset``.
            fetched_ahead: Batches the trainer fetches before it trains on the one in hand
                (Lightning's training loop: 1).
            **options: ``DistributedLoader``'s (``num_workers``, ``even``, ``split``...).

        Raises:
            ConfigError: ``fetched_ahead`` is not a whole number >= 0, or an option of
                ``DistributedLoader`` is invalid.
        """
        if not isinstance(fetched_ahead, int) or isinstance(fetched_ahead, bool) or fetched_ahead < 0:
            raise ConfigError(f"fetched_ahead must be a whole number >= 0, got {fetched_ahead!r}")
        super().__init__(dataset, **options)
        self.fetched_ahead = fetched_ahead
        # the states before the first batch of this pass and after each newest batch
        self._after: deque[dict[str, Any]] = deque(maxlen=fetched_ahead + 2)
        self._ran_out = False

    def __iter__(self) -> Iterator[Any]:
        self._after.clear()
        self._after.append(self.loader.state_dict())
        self._ran_out = False
        for batch in super().__iter__():
            self._after.append(self.loader.state_dict())
            yield batch
        self._ran_out = True

    @property
    def _iterator(self) -> Any:
        """The live DataLoader iterator, where Lightning looks for one when a fit ends."""
        return self._live_iterator

    @_iterator.setter
    def _iterator(self, value: Any) -> None:
        # Lightning ends a fit by resetting each train loader's ``_iterator`` to None (it stops a
        # plain DataLoader's workers the same way): stop the workers here rather than leave them
        # to the garbage collector (see ``close``); the saved states are kept
        if value is None:
            self.close()

    def _loader_state(self) -> dict[str, Any]:
        """The state after the batch the trainer consumed last: ``fetched_ahead`` before the
        newest, or the newest once the data ran out (the trainer holds no batch beyond it)."""
        if not self._after:
            return super()._loader_state()
        if self._ran_out:
            return self._after[-1]
        return self._after[max(0, len(self._after) - 1 - self.fetched_ahead)]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Every old rank's state (see ``DistributedLoader.load_state_dict``).

        Args:
            state_dict: What ``state_dict()`` returned, from a run of any world size.
        """
        super().load_state_dict(state_dict)
        self._after.clear()

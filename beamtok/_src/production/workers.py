"""Which torch DataLoader worker this process is, without importing torch."""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator

__all__ = ["as_dataloader_worker", "dataloader_worker"]

# Set while the training process checks a state for a worker that has not started yet.
_POSED: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("beamtok_posed_worker", default=None)


def dataloader_worker() -> tuple[int, int]:
    """(worker id, worker count) inside a torch DataLoader worker, else (0, 1)."""
    posed = _POSED.get()
    if posed is not None:
        return posed
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is None:
        return 0, 1
    info = torch_data.get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)


@contextlib.contextmanager
def as_dataloader_worker(worker: int, num_workers: int) -> Iterator[None]:
    """Inside the block, :func:`dataloader_worker` answers ``(worker, num_workers)``: the
    training process builds (without reading) the iterator a worker will build, to check a
    state before any worker starts.

    Args:
        worker: The worker id to answer.
        num_workers: The worker count to answer.
    """
    token = _POSED.set((worker, num_workers))
    try:
        yield
    finally:
        _POSED.reset(token)

"""Which torch DataLoader worker this process is, without importing torch."""

from __future__ import annotations

import sys

__all__ = ["dataloader_worker"]


def dataloader_worker() -> tuple[int, int]:
    """(worker id, worker count) inside a torch DataLoader worker, else (0, 1)."""
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is None:
        return 0, 1
    info = torch_data.get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)

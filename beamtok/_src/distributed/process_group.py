"""Starting and ending a ``torch.distributed`` process group so that restarts and exits work.

:func:`start_process_group` is the one call a training script needs, under ``torchrun`` (any
number of processes, ``--max-restarts`` included) or run as a plain ``python`` process (a group
of one, so the same loop runs on a laptop). Under ``torchrun --standalone --max-restarts N`` the
rendezvous store of the first attempt serves every restart and keeps that attempt's keys: a
plain ``init_process_group`` of a restarted group meets the stale keys and waits forever. So
each attempt starts the group under a key prefix of its own (``TORCHELASTIC_RESTART_COUNT``).

:func:`end_process_group` is the ending a gloo job needs: the caller frees its model and
loaders, then a barrier and ``destroy_process_group``. Left to interpreter exit, a gloo thread
still freeing the last collective's tensors needs the GIL while Python shuts down, and a rank
hangs or aborts now and then (torch 2.13).
"""

from __future__ import annotations

import gc
import os
import time
from datetime import timedelta

from beamtok._src.base.extras import missing_extra

try:
    import torch
    import torch.distributed as dist
except ImportError as error:
    raise ModuleNotFoundError(missing_extra("beamtok._src.distributed.process_group", "torch") or str(error)) from None

__all__ = ["end_process_group", "start_process_group"]

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def start_process_group(backend: str = "gloo", *, timeout: timedelta | None = None) -> tuple[int, int]:
    """Start the default process group and return ``(rank, world_size)``.

    Under ``torchrun``: over its store, under this attempt's own key prefix, so a group
    restarted by ``--max-restarts`` starts rather than hangs. Outside it: a group of one
    process. With ``backend="nccl"`` each process takes the GPU of its ``LOCAL_RANK`` first
    (collectives of Python objects, such as a loader's state gather, need it). A group already
    started is left as it is.

    Args:
        backend: ``"gloo"`` or ``"nccl"``.
        timeout: The collectives' timeout (None: torch's).
    Returns:
        ``(rank, world_size)``.
    """
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not all(name in os.environ for name in TORCHRUN_VARIABLES):
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
        return 0, 1
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # torchrun's agent hosts the store
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=not agent_store and rank == 0
    )
    dist.init_process_group(
        backend, store=dist.PrefixStore(f"restart-{restart}", store), rank=rank, world_size=world, timeout=timeout
    )
    return rank, world


def end_process_group() -> None:
    """Wait for every rank, then end the group. Call it after the model, optimizer and loaders
    are freed (returned from the function that held them), so nothing of the group's is freed
    at interpreter exit."""
    if not dist.is_initialized():
        return
    gc.collect()
    dist.barrier()
    time.sleep(0.2)  # gloo's threads free the last collectives' work objects, which takes the GIL
    dist.destroy_process_group()

"""End a helper process when the process that started it dies.

A DataLoader worker whose training process is SIGKILLed is left waiting on its queues for
good (torchdata cancels the wait only when the loader says it is done), holding its memory.
On Linux the kernel can send the worker a signal when its parent dies
(``prctl(PR_SET_PDEATHSIG)``); elsewhere a daemon thread polls the parent's id.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1
_armed_in: int | None = None  # the process id that armed it (a forked child must arm again)


def die_with_parent(poll_seconds: float = 1.0) -> None:
    """Arm this process to be killed (SIGKILL) when its parent process dies; once a process.

    Args:
        poll_seconds: How often the fallback thread checks the parent, where the kernel
            cannot be asked.
    """
    global _armed_in
    if _armed_in == os.getpid():
        return
    _armed_in = os.getpid()
    parent = os.getppid()
    if sys.platform.startswith("linux") and _ask_kernel():
        if os.getppid() != parent:  # the parent died before the request: nobody will send the signal
            os.kill(os.getpid(), signal.SIGKILL)
        return
    threading.Thread(target=_watch, args=(parent, poll_seconds), name="beamtok-parent-watch", daemon=True).start()


def _ask_kernel() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int, poll_seconds: float) -> None:
    while os.getppid() == parent:
        time.sleep(poll_seconds)
    os.kill(os.getpid(), signal.SIGKILL)

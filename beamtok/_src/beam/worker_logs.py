"""Keep Beam's local worker processes as quiet as Beam's loggers here.

With ``--direct_running_mode=multi_processing`` each worker process logs its start, its
channels and its shutdown at INFO and WARNING straight to the stderr it inherited (about
twenty lines per worker), before any pipeline option could lower its level. While a local
pipeline runs, stderr (file descriptor 2) is therefore a pipe: lines in the logging format
``LEVEL:logger:message`` below the level of the ``apache_beam`` logger (ERROR unless set)
are dropped, everything else is passed on unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from typing import IO

__all__ = ["beam_level", "mute_workers", "quiet_worker_stderr"]

_MUTED = threading.Event()
_RECORD = re.compile(rb"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]*:")


def beam_level() -> int:
    """The level Beam's records must reach to be shown: the ``apache_beam`` logger's, or ERROR."""
    return logging.getLogger("apache_beam").level or logging.ERROR


def mute_workers() -> None:
    """Drop every further line the filter receives (an interrupted process ending: its
    workers' last words are tracebacks of the interrupt)."""
    _MUTED.set()


def _keep(line: bytes, threshold: int) -> bool:
    match = _RECORD.match(line)
    return match is None or logging.getLevelName(match.group(1).decode()) >= threshold


@contextlib.contextmanager
def quiet_worker_stderr(threshold: int | None = None) -> Iterator[IO[str]]:
    """Filter file descriptor 2 while the block runs; yield a stream to the real stderr (for
    a progress bar, which must not wait for a newline)."""
    threshold = beam_level() if threshold is None else threshold
    try:
        uses_fd2 = sys.stderr.fileno() == 2
    except (AttributeError, ValueError, OSError):
        uses_fd2 = False  # a notebook or a test runner: Python's stderr is not the descriptor
    if threshold <= logging.DEBUG:
        yield sys.stderr
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    real = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")

    def pump() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                if _keep(line, threshold) and not _MUTED.is_set():
                    os.write(saved, line)

    thread = threading.Thread(target=pump, name="beamtok-stderr", daemon=True)
    thread.start()
    try:
        yield real if uses_fd2 else sys.stderr
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes this process's write end of the pipe
        thread.join(timeout=5)  # a worker still alive holds its end; its lines still pass later
        real.close()
        if not thread.is_alive():
            os.close(saved)

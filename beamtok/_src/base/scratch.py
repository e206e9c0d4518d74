"""Scratch directories a process removes even when it ends abruptly.

A cache build keeps a few directories under the system's temporary directory while it runs
(its progress files, the worker server's socket, Beam's own per-pipeline directory). Each is
removed when its owner is done; Ctrl-C ends a build with ``os._exit`` (see
``beamtok._src.cli.interrupt``), which runs no ``finally``, so it removes those still held first.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator

__all__ = ["held_directory", "hold_directory", "release_directory", "remove_held_directories", "scratch_directory"]

_HELD: set[str] = set()
_LOCK = threading.Lock()


def hold_directory(path: str) -> str:
    """Remember ``path`` as this process's scratch (removed by :func:`remove_held_directories`)."""
    with _LOCK:
        _HELD.add(path)
    return path


def release_directory(path: str) -> None:
    """Remove ``path`` and forget it."""
    with _LOCK:
        _HELD.discard(path)
    shutil.rmtree(path, ignore_errors=True)


def remove_held_directories() -> None:
    """Remove every scratch directory still held (for a process about to end abruptly)."""
    with _LOCK:
        held = sorted(_HELD)
        _HELD.clear()
    for path in held:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def held_directory(path: str) -> Iterator[str]:
    """``path`` held while the block runs, then removed."""
    hold_directory(path)
    try:
        yield path
    finally:
        release_directory(path)


def scratch_directory(prefix: str) -> contextlib.AbstractContextManager[str]:
    """A new directory under the temporary directory, held while the block runs, then removed."""
    return held_directory(tempfile.mkdtemp(prefix=prefix))

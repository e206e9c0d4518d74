"""Python's cyclic garbage collector paused around bulk work that only creates objects.

Importing Beam, building a pipeline's graph or checking a tokenizer's fast-path encoder
allocates containers by the hundred thousand, nearly all of them kept (Beam's modules) or
freed by reference counting (the encoder's checks). Each burst sets off collections, and
every oldest-generation one walks every object the process holds (Beam's alone are
hundreds of thousands), freeing nothing. Reference counting
still frees everything acyclic while paused; a cycle made meanwhile waits for the next
collection.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_lock = threading.Lock()
_depth = 0  # blocks inside gc_paused, in every thread
_resume = False  # whether the collector ran when the first of them began


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off; it is back on when the last block of
    any thread ends, if it was on when the first began (a caller's ``gc.disable()`` stands)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()

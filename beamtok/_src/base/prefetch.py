"""Work ahead on helper threads: while the consumer handles item k, item k+1 is made.

Used to decode the next Parquet row group (also the first one of the next shard) while the
stream hands out the current one: pyarrow and numpy release the GIL while they decode, so
the two overlap on two cores.

Every prefetcher of a process shares one small pool of threads. A stream that opens many
shards (a mix of a thousand sources touches a thousand) would otherwise start and join a
thread per shard, which costs more than decoding a small row group; and threads beyond the
cores decode no faster. A process forked from one that used the pool (DataLoader workers)
starts its own: the parent's threads do not exist in the child.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from typing import Generic, TypeVar

__all__ = ["Prefetcher", "shared_pool"]

K = TypeVar("K")
T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_lock = threading.Lock()


def shared_pool() -> ThreadPoolExecutor:
    """This process's prefetch threads (as many as cores, 2 to 8: pyarrow decodes a row
    group's columns on threads of its own), made when first asked."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(
                max_workers=min(8, max(2, os.cpu_count() or 1)), thread_name_prefix="beamtok-prefetch"
            )
            _pool_pid = os.getpid()
        return _pool


class Prefetcher(Generic[K, T]):
    """``make(key)`` for each key in order; the first ``ahead`` are asked for at once, and
    each item taken asks for the next. Items are made one at a time, in order (a reader's
    file is never read by two threads at once), on the shared pool. Exceptions surface where
    their item is taken. ``close()`` cancels what has not started and waits for what has,
    so ``make`` never runs after the caller moved on (and closed what it reads from)."""

    # held by the class: a reader closed at interpreter exit runs after module globals are gone
    _wait_for = staticmethod(wait_for_futures)

    def __init__(self, make: Callable[[K], T], keys: Iterable[K], ahead: int = 1) -> None:
        self._make = make
        self._keys = iter(keys)
        self._pending: list[Future[T]] = []  # asked for, not taken, in order
        self._queued: deque[tuple[K, Future[T]]] = deque()  # asked for, not started
        self._running = False
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = shared_pool()
        for _ in range(ahead):
            self._submit()

    def _submit(self) -> None:
        key = next(self._keys, _END)
        if key is _END or self._pool is None:
            return
        future: Future[T] = Future()
        self._pending.append(future)
        with self._lock:
            self._queued.append((key, future))  # type: ignore[arg-type]
        self._start_next()

    def _start_next(self) -> None:
        with self._lock:
            if self._running or not self._queued or self._pool is None:
                return
            key, future = self._queued.popleft()
            self._running = True
            pool = self._pool
        pool.submit(self._run, key, future)

    def _run(self, key: K, future: Future[T]) -> None:
        try:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(self._make(key))
                except BaseException as e:
                    future.set_exception(e)
        finally:
            with self._lock:
                self._running = False
            self._start_next()

    @property
    def pending(self) -> int:
        """Items being made or waiting to be made (not those made and not taken yet)."""
        return sum(not f.done() for f in self._pending)

    def __iter__(self) -> Prefetcher[K, T]:
        return self

    def __next__(self) -> T:
        if not self._pending:
            self.close()
            raise StopIteration
        future = self._pending.pop(0)
        self._submit()
        try:
            return future.result()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with self._lock:
            if self._pool is None:
                return
            self._pool = None  # nothing more starts
            self._queued.clear()
        running = [f for f in self._pending if not f.cancel()]
        self._pending.clear()
        self._wait_for(running)


_END = object()

"""Work ahead on one helper thread: while the consumer handles item k, item k+1 is made.

Used to decode the next Parquet row group (also the first one of the next shard) while the
stream hands out the current one: pyarrow and numpy release the GIL while they decode, so
the two overlap on two cores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

__all__ = ["Prefetcher"]

K = TypeVar("K")
T = TypeVar("T")


class Prefetcher(Generic[K, T]):
    """``make(key)`` for each key in order; the first ``ahead`` start at once, and each item
    taken starts the next. Exceptions surface where their item is taken. ``close()`` waits
    for the item being made, so ``make`` never runs after the caller moved on (and closed
    what it reads from)."""

    def __init__(self, make: Callable[[K], T], keys: Iterable[K], ahead: int = 1) -> None:
        self._make = make
        self._keys = iter(keys)
        self._pending: list[Future[T]] = []
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1, thread_name_prefix="beamtok-prefetch")
        for _ in range(ahead):
            self._submit()

    def _submit(self) -> None:
        key = next(self._keys, _END)
        if key is not _END and self._pool is not None:
            self._pending.append(self._pool.submit(self._make, key))  # type: ignore[arg-type]

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
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        pool.shutdown(wait=True)


_END = object()

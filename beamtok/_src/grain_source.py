"""A packed cache as a grain random-access data source, for JAX trainers that read through
grain (MaxText and others).

:class:`CacheDataSource` has ``__len__`` and ``__getitem__`` by global row number: row ``i``
is the ``i``-th example ``Dataset.from_cache(directory)`` yields (shards in order, rows in
order), with the same fields (``input_ids``, ``segment_ids``, ``position_ids``,
``loss_mask``; ``labels`` and ``attention_mask`` for SFT caches; the provenance ``shard``,
``index``, ``doc``, ``token``). grain decides the order, the sharding over processes, the
worker processes and the checkpoint (its sampler's state is the record index), so a grain
loader over a cache resumes as grain resumes::

    import grain.python as gp
    from beamtok._src.grain_source import CacheDataSource

    source = CacheDataSource("build/cache")
    loader = gp.DataLoader(
        data_source=source,
        sampler=gp.IndexSampler(len(source), shard_options=gp.ShardByJaxProcess(), shuffle=True, seed=0, num_epochs=1),
        operations=[gp.Batch(8, drop_remainder=True)],
        worker_count=2,
    )

Rows are read through the cache's random access (each row group decoded once while it fits
the decode budget). A copy sent to a grain worker process reopens the cache there. Only a
packed cache has rows to address; grain's own shuffle replaces beamtok's ``global_shuffle``,
and its checkpoint replaces beamtok's state (they do not mix).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError

__all__ = ["CacheDataSource"]


class CacheDataSource:
    """The rows of a packed cache by global row number (grain's ``RandomAccessDataSource``).

    Args:
        directory: The cache directory (local or an object store URL).
        fingerprint: The spec fingerprint the cache must have; None takes whatever it holds.
        max_bytes: Decoded rows kept per process (None: the reader's default budget).

    Raises:
        ConfigError: The cache is not packed (its rows are documents, not training rows).
        CacheError: The directory holds no complete cache.
    """

    def __init__(self, directory: str, *, fingerprint: str | None = None, max_bytes: int | None = None) -> None:
        from beamtok._src.cache.read.reader import Cache

        self.directory = directory
        self.fingerprint = fingerprint
        self.max_bytes = max_bytes
        cache = Cache(directory, fingerprint=fingerprint)
        if cache.spec.pack is None:
            raise ConfigError(
                f"{directory}: an unpacked cache has no rows to address; build it packed (--pack concat ...)"
            )
        self._length = int(sum(int(n) for n in cache.manifest.column("rows")))
        self._cache: Any = cache
        self._access: Any = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, record_key: int) -> dict[str, Any]:
        """Row ``record_key`` (0 to ``len - 1``; a negative key counts from the end).

        Args:
            record_key: The global row number.

        Returns:
            The row as ``from_cache`` yields it: numpy arrays and provenance integers.

        Raises:
            IndexError: The key is past the rows.
        """
        return self.__getitems__([record_key])[0]

    def __getitems__(self, record_keys: Any) -> list[dict[str, Any]]:
        """Several rows at once, in the order given (each row group decoded once).

        Args:
            record_keys: Global row numbers.

        Returns:
            The rows, as :meth:`__getitem__` gives them.

        Raises:
            IndexError: A key is past the rows.
        """
        keys = np.asarray([int(k) for k in record_keys], dtype=np.int64)
        keys = np.where(keys < 0, keys + self._length, keys)
        bad = keys[(keys < 0) | (keys >= self._length)]
        if len(bad):
            raise IndexError(f"{self.directory}: row {int(bad[0])} is past the cache's {self._length} rows")
        # grain reads records on a pool of threads; the row access (its open files, its decoded
        # row groups) serves one caller at a time: two threads reading one file raced in pyarrow
        with self._lock:
            return list(self._rows().block(keys).examples)

    def _rows(self) -> Any:
        if self._access is None:
            from beamtok._src.cache.read.random_access import RowAccess
            from beamtok._src.cache.read.reader import Cache

            if self._cache is None:
                self._cache = Cache(self.directory, fingerprint=self.fingerprint)
            self._access = RowAccess(self._cache, max_bytes=self.max_bytes)
        return self._access

    def __getstate__(self) -> dict[str, Any]:
        # open files, threads and decoded rows stay behind: a copy (a grain worker) reopens the cache
        return {**self.__dict__, "_cache": None, "_access": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CacheDataSource({self.directory!r}, {self._length} rows)"

"""The one interface through which the stream reads shards.

A :class:`ShardBackend` opens a shard at a cursor and yields its examples, each with the
cursor after it (``Produced``); it may start upcoming shards early (``prefetch``), holds
resources until ``close``, and knows each shard's row count when it can (a packed cache does;
the shard processing run now does not), which lets the source seek to a global example. The
stream never knows more: where rows come from is the backend's business. Implementations:
``OnTheFly`` (the shard processing in this process, ``beamtok._src.production.on_the_fly``),
``ParallelShards`` (in worker processes), and the packed and repacked cache backends of
``beamtok._src.cache.read.backend``. This package sits below both the stream and the cache.

A :class:`ShardOrigin` is what a ``Dataset`` holds: it says which per-shard stages may still
be added, and makes the backend for the final spec.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.core.spec import Spec
from beamtok._src.shards.items import Produced, ShardCursor
from beamtok._src.sources.urls import Shard

if TYPE_CHECKING:
    from beamtok._src.production.decode_pool import DecodePool
    from beamtok._src.shards.rows import RowBlock
    from beamtok._src.shards.spans import RowSpan

__all__ = ["RowSource", "SequentialBackend", "ShardBackend", "ShardOrigin"]


class RowSource(Protocol):
    """Random access to rows by global row number (a packed cache)."""

    total: int
    shard_rows: tuple[int, ...]  # rows of each shard, in cache order (they sum to total)

    def block(self, global_rows: np.ndarray) -> RowBlock:
        """These rows, in the order given, as one block."""
        ...

    def decode_ahead(self, global_rows: np.ndarray, keep: int) -> None:
        """A hint: these rows will be asked for next, and the ``keep`` row groups read last are
        still being read (decode the rows' groups ahead where the budget allows, or not)."""
        ...

    def close(self) -> None: ...


class ShardBackend(Protocol):
    """What reads a stream's shards: in this process, in worker processes, or from a cache."""

    has_spans: bool
    """Whether ``open_spans`` gives decoded blocks (else it gives None)."""

    def open(self, shard: Shard, cursor: ShardCursor) -> Iterator[Produced]:
        """The examples of one shard from a cursor on, each with the cursor after it.

        Args:
            shard: The shard to read.
            cursor: Where to start in it.
        """
        ...

    def prefetch(self, upcoming: Sequence[tuple[Shard, ShardCursor]]) -> None:
        """Shards the stream will open next, in order (a hint; may be ignored).

        Args:
            upcoming: Each shard with the cursor it will be opened at.
        """
        ...

    def close(self) -> None:
        """Release worker processes and files."""
        ...

    def open_spans(self, shard: Shard, cursor: ShardCursor) -> Iterator[RowSpan] | None:
        """The same rows as ``open`` in decoded blocks, or None where rows come one at a time.

        Args:
            shard: The shard to read.
            cursor: Where to start in it.
        """
        ...

    def rows(self, shard: Shard) -> int | None:
        """How many examples ``shard`` yields, or None when that is not known in advance."""
        ...

    def cursor_at(self, shard: Shard, row: int) -> ShardCursor:
        """The cursor of example ``row`` of ``shard`` (only where ``rows`` is known)."""
        ...


class SequentialBackend:
    """A backend that reads in the consumer's process: nothing to prefetch or close, row
    counts unknown."""

    has_spans = False

    def prefetch(self, upcoming: Sequence[tuple[Shard, ShardCursor]]) -> None:
        return None

    def close(self) -> None:
        return None

    def open_spans(self, shard: Shard, cursor: ShardCursor) -> Iterator[RowSpan] | None:
        return None

    def rows(self, shard: Shard) -> int | None:
        return None

    def cursor_at(self, shard: Shard, row: int) -> ShardCursor:
        raise ConfigError("this data's row counts are not known in advance; resume from a state_dict instead")


class ShardOrigin(Protocol):
    """Where a dataset's shards come from: files read now, or a cache."""

    @property
    def cached(self) -> bool: ...

    def check_step(self, name: str) -> None:
        """Raise ConfigError when per-document step ``name`` cannot be added here."""
        ...

    def check_pack(self, name: str) -> None:
        """Raise ConfigError when the data cannot be packed (again) here.

        Args:
            name: The packing stage's name, for the message.
        """
        ...

    def backend(self, spec: Spec, workers: int) -> ShardBackend:
        """The backend that yields ``spec``'s examples, with ``workers`` worker processes."""
        ...

    def row_access(
        self, spec: Spec, local_copy: bool | str | None = None, pool: DecodePool | None = None
    ) -> RowSource | None:
        """Random access to ``spec``'s examples by global row number, where the origin has it
        (a packed cache), else None. ``local_copy``: read them from a local memory-mapped copy
        (True, or the directory to keep it in), decode row groups (False), or choose by size
        (None). ``pool``: decode row groups into this pool, shared with other origins' row
        accesses (the sources of a mix); implies no local copy."""
        ...

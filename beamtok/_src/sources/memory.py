"""In-memory data as shards: a sequence cut into contiguous parts, a re-iterable object, and
the shards of a Hugging Face ``IterableDataset``."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import check_int
from beamtok._src.sources.urls import Shard

__all__ = ["HfIterableShard", "hf_iterable_shards", "iterable_shard", "sequence_shards"]


@dataclasses.dataclass(frozen=True)
class HfIterableShard:
    """One of a Hugging Face ``IterableDataset``'s shards, iterated afresh on each call."""

    dataset: Any
    count: int
    index: int

    def __call__(self) -> Iterable[Any]:
        if self.count == 1:
            return iter(self.dataset)
        return iter(self.dataset.shard(num_shards=self.count, index=self.index))


def sequence_shards(data: Any, shards: int) -> tuple[Shard, ...]:
    """``data`` (a list, a ``datasets.Dataset``...) cut into ``shards`` contiguous shards."""
    check_int(shards, "shards", minimum=1)
    n = len(data)
    bounds = [n * i // shards for i in range(shards + 1)]
    if shards == 1:
        parts = [data]
    elif hasattr(data, "select"):  # datasets.Dataset: a cheap view of the rows
        parts = [data.select(range(a, b)) for a, b in itertools.pairwise(bounds)]
    else:
        parts = [data[a:b] for a, b in itertools.pairwise(bounds)]
    return tuple(Shard(i, f"memory://sequence/{i}", part) for i, part in enumerate(parts))


def iterable_shard(source: Iterable[Any] | Callable[[], Iterable[Any]]) -> Shard:
    """A re-iterable object, or a function returning a fresh iterable, as one shard. Resuming
    skips the items before the cursor, so a one-shot iterator is refused."""
    if callable(source) and not isinstance(source, Iterable):
        factory: Callable[[], Iterable[Any]] = source
    elif isinstance(source, Iterator):
        raise ConfigError(
            "from_iterable needs a re-iterable object or a function returning an iterable, not a one-shot iterator"
        )
    elif isinstance(source, Iterable):
        obj = source

        def factory() -> Iterable[Any]:
            return iter(obj)
    else:
        raise ConfigError(f"from_iterable needs an iterable, got {type(source).__name__}")
    return Shard(0, "memory://iterable/0", factory)


def hf_iterable_shards(dataset: Any) -> tuple[Shard, ...]:
    """A streamed ``datasets.IterableDataset``'s own shards."""
    count = max(1, int(getattr(dataset, "num_shards", 1) or 1))
    return tuple(Shard(i, f"memory://hf-iterable/{i}", HfIterableShard(dataset, count, i)) for i in range(count))

"""Hold one item back: yield each item with the one after it (None after the last).

A cursor "after" an example is where the next one starts, so the shard step and the cache
readers all need to see one item ahead before they hand the current one on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["lookahead"]

T = TypeVar("T")


def lookahead(items: Iterable[T]) -> Iterator[tuple[T, T | None]]:
    """``(item, next_item)`` pairs; the last item comes with None. Items are pulled lazily."""
    it = iter(items)
    for current in it:
        for following in it:
            yield current, following
            current = following
        yield current, None

"""The token lengths of a shard's documents, as its processing tokenized them (before packing).

Rows cannot always say how long their documents were: a window packer reorders pieces, cuts long
documents into pieces packed apart, truncates or drops tails. The cache build therefore records,
per shard, how many tokenized documents had each length (in the shard's record, beside its
Parquet file), and ``beamtok stats`` reports document figures from that record; the input files'
figures come from the same tally over the on-the-fly processing, so the two agree for every
packing mode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from beamtok._src.base.errors import CacheError
from beamtok._src.shards.items import DocItem

__all__ = ["DocumentLengths"]


class DocumentLengths:
    """How many documents had each token length; added with ``+``, written as two lists."""

    __slots__ = ("_counts",)

    def __init__(self, counts: Mapping[int, int] | None = None) -> None:
        self._counts: Counter[int] = Counter(counts or {})

    def add(self, length: int) -> None:
        self._counts[length] += 1

    def tally(self, items: Iterable[DocItem]) -> Iterator[DocItem]:
        """``items`` unchanged, each tokenized document's length counted as it passes."""
        for item in items:
            if item.value is not None:
                self._counts[len(item.value)] += 1
            yield item

    def __add__(self, other: DocumentLengths) -> DocumentLengths:
        return DocumentLengths(self._counts + other._counts)

    def __len__(self) -> int:
        return sum(self._counts.values())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DocumentLengths) and +self._counts == +other._counts

    def __repr__(self) -> str:
        return f"DocumentLengths({len(self)} documents)"

    def values(self) -> np.ndarray:
        """Every document's length, shortest first."""
        lengths = sorted(self._counts)
        return np.repeat(np.asarray(lengths, dtype=np.int64), [self._counts[n] for n in lengths])

    def to_json(self) -> dict[str, list[int]]:
        lengths = sorted(n for n, c in self._counts.items() if c)
        return {"lengths": lengths, "counts": [self._counts[n] for n in lengths]}

    @classmethod
    def from_json(cls, data: Any, where: str) -> DocumentLengths:
        try:
            lengths, counts = data["lengths"], data["counts"]
            if len(lengths) != len(counts) or not all(isinstance(v, int) and v >= 0 for v in [*lengths, *counts]):
                raise ValueError("two lists of non-negative integers of one length expected")
        except (KeyError, TypeError, ValueError) as e:
            raise CacheError(f"{where}: malformed document lengths: {e}") from None
        return cls(dict(zip(lengths, counts)))

"""What reached the consumer's side of a root source: documents, examples, real and pad tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from beamtok._src.base.errors import StateError
from beamtok._src.base.validate import check_int
from beamtok._src.shards.items import NO_COUNTS, DocCounts, Produced
from beamtok._src.shards.spans import Taken
from beamtok._src.stream.state import StatsJSON, check_keys

__all__ = ["StreamStats", "describe_stats", "summed_stats"]


class StreamStats:
    """Counts of documents and examples that reached the consumer's side of the source."""

    def __init__(self) -> None:
        self.documents = NO_COUNTS
        self.examples = 0
        self.tokens = 0
        self.pad_tokens = 0

    def record(self, produced: Produced) -> None:
        self.documents = self.documents + produced.counts
        if produced.example is not None:
            self._count(produced.example)

    def _count(self, example: dict[str, Any]) -> None:
        self.examples += 1
        ids = example.get("input_ids")
        if ids is None:
            return
        segments = example.get("segment_ids")
        real = int(np.count_nonzero(segments)) if segments is not None else len(ids)
        self.tokens += real
        self.pad_tokens += len(ids) - real

    def record_taken(self, taken: Taken) -> None:
        self.documents = self.documents + taken.counts
        tokens = taken.tokens()
        if tokens is None:  # rows held as examples
            for example in taken.examples():
                self._count(example)
            return
        self.examples += taken.rows
        self.tokens += tokens[0]
        self.pad_tokens += tokens[1]

    def add(self, other: StreamStats) -> None:
        self.documents = self.documents + other.documents
        self.examples += other.examples
        self.tokens += other.tokens
        self.pad_tokens += other.pad_tokens

    def to_json(self) -> StatsJSON:
        return StatsJSON(
            documents=self.documents.to_json(),
            examples=self.examples,
            tokens=self.tokens,
            pad_tokens=self.pad_tokens,
        )

    @classmethod
    def from_json(cls, state: Any) -> StreamStats:
        check_keys(state, StatsJSON, "stats")
        stats = cls()
        try:
            stats.documents = DocCounts.from_json(state["documents"])
        except (KeyError, TypeError, AttributeError) as e:
            raise StateError(f"stats: malformed document counts {state['documents']!r}") from e
        stats.examples = check_int(state["examples"], "examples", "stats")
        stats.tokens = check_int(state["tokens"], "tokens", "stats")
        stats.pad_tokens = check_int(state["pad_tokens"], "pad_tokens", "stats")
        return stats


def summed_stats(stats: Sequence[Mapping[str, Any]], new_part: int) -> StatsJSON:
    """All old readers' stats on new reader 0 (``new_part``), empty stats on the others, so
    stats summed over readers stay exact after a resume on another world size."""
    total = StreamStats()
    if new_part == 0:
        for one in stats:
            total.add(StreamStats.from_json(one))
    return total.to_json()


def describe_stats(stats: Any) -> str:
    """A saved source's stats in words."""
    if not isinstance(stats, dict):
        return "?"
    documents = stats.get("documents")
    read = documents.get("read", 0) if isinstance(documents, dict) else 0
    return f"{stats.get('examples', 0):,} examples, {stats.get('tokens', 0):,} tokens, {read:,} documents finished"

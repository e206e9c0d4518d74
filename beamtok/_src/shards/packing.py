"""Packing a shard's documents into examples: the one place that chooses the packer.

``concat_chunk`` is cut column-wise (:mod:`beamtok._src.shards.column_chunker`, rows in blocks);
every other mode packs a row at a time through :class:`ShardPacker` over the mode's packer
(``beamtok._src.transforms.packing_modes``); a spec without tokens passes its records through.
The stream, the cache writer, an unpacked cache packed as it is read and ``verify`` all pack
here, so a mode has one implementation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from beamtok._src.base.lookahead import lookahead
from beamtok._src.shards.column_chunker import ColumnChunker, packs_column_wise
from beamtok._src.shards.items import (
    END_OF_SHARD,
    NO_COUNTS,
    DocCounts,
    DocItem,
    Produced,
    ShardCursor,
    check_token_offset,
    with_training_fields,
)
from beamtok._src.shards.spans import SpanReader
from beamtok._src.sources.documents import SkipReason
from beamtok._src.transforms.pack import Packer
from beamtok._src.transforms.packing_modes import PackSpec, make_packer

__all__ = ["ShardPacker", "packed"]


def packed(
    shard_index: int,
    documents: Iterable[DocItem],
    pack: PackSpec | None,
    supervised: bool,
    start: ShardCursor,
    *,
    tokenized: bool = True,
) -> Iterator[Produced]:
    """A shard's documents (read from ``start``) packed by ``pack`` (None: a whole document a
    row), each example with the cursor after it; documents that are records, not tokens
    (``tokenized`` false), pass through as they are."""
    if tokenized and packs_column_wise(pack):
        assert pack is not None
        return SpanReader(ColumnChunker(shard_index, start, pack, supervised).spans(documents))
    return ShardPacker(shard_index, start, make_packer(pack) if tokenized else None, supervised).run(documents)


class ShardPacker:
    """Pack one shard's documents into examples, from a start cursor.

    Each example comes with the cursor after it (where the next example starts, or ``done``)
    and with the counts of the documents the stream no longer needs once it is there.
    """

    def __init__(self, shard_index: int, start: ShardCursor, packer: Packer | None, supervised: bool = False) -> None:
        self.shard_index = shard_index
        self.start = start
        self.packer = packer
        self.supervised = supervised
        self._pending_counts: deque[tuple[int, DocCounts]] = deque()

    def run(self, docs: Iterable[DocItem]) -> Iterator[Produced]:
        index = self.start.index
        for (doc, token, fields), following in lookahead(self._rows(docs)):
            if following is None:
                cursor, counts = ShardCursor(index + 1, 0, 0, True), self._counts_due(None)
            else:
                cursor, counts = ShardCursor(index + 1, following[0], following[1]), self._counts_due(following[0])
            yield Produced(self._example(fields, index, doc, token), cursor, counts)
            index += 1
        if index == self.start.index:  # no example at all: the counts still go out
            yield Produced(None, ShardCursor(index, 0, 0, True), self._counts_due(None))

    def _rows(self, docs: Iterable[DocItem]) -> Iterator[tuple[int, int, dict[str, Any]]]:
        first = True
        for item in docs:
            if item.value is None:
                self._pending_counts.append((item.through, item.counts))
                continue
            if first and self.start.token and self.packer is not None and self.packer.TOKEN_OFFSETS:
                check_token_offset(self.shard_index, self.start, item)
            first = False
            yield from self._pack(item)
        yield from self._finish()

    def _pack(self, item: DocItem) -> list[tuple[int, int, dict[str, Any]]]:
        counts = item.counts
        if self.packer is None:
            rows = [(item.cursor, 0, dict(item.value))]
        else:
            before = replace(self.packer.counts)
            offset = self.start.token if item.cursor == self.start.doc else 0
            rows = [(r.doc, r.token, r.fields()) for r in self.packer.add(item.cursor, item.value, offset)]
            after = self.packer.counts
            if after.truncated_tokens > before.truncated_tokens:
                counts = replace(
                    counts, truncated_tokens=counts.truncated_tokens + after.truncated_tokens - before.truncated_tokens
                )
            if after.too_long > before.too_long:
                counts = counts.skip_emitted(SkipReason.TOO_LONG)
        self._pending_counts.append((item.through, counts))
        return rows

    def _finish(self) -> list[tuple[int, int, dict[str, Any]]]:
        if self.packer is None:
            return []
        before = self.packer.counts.dropped_tokens
        rows = [(r.doc, r.token, r.fields()) for r in self.packer.finish()]
        if self.packer.counts.dropped_tokens > before:
            self._pending_counts.append(
                (END_OF_SHARD, DocCounts(dropped_tokens=self.packer.counts.dropped_tokens - before))
            )
        return rows

    def _counts_due(self, next_doc: int | None) -> DocCounts:
        """Counts of documents before ``next_doc`` (None: all that are left)."""
        total = NO_COUNTS
        while self._pending_counts and (next_doc is None or self._pending_counts[0][0] < next_doc):
            total = total + self._pending_counts.popleft()[1]
        return total

    def _example(self, fields: dict[str, Any], index: int, doc: int, token: int) -> dict[str, Any]:
        example = with_training_fields(fields) if self.supervised else fields  # fields are this row's own dict
        example.update(shard=self.shard_index, index=index, doc=doc, token=token)
        return example

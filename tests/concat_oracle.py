"""The per-row definition of ``concat_chunk``: the tests' oracle for the one packer the
library runs (``beamtok._src.shards.column_chunker``, rows cut in blocks). Run a row at a time
through ``beamtok._src.shards.packing.ShardPacker``, it gives each row, its provenance, the cursor
after it and the document counts it carries; tests/shards/test_column_pack.py holds the two equal."""

from __future__ import annotations

from collections.abc import Iterator

from beamtok._src.transforms.pack import PackCounts, Row, _join, _pad_row, _slice
from beamtok._src.transforms.sft import TokenDoc

__all__ = ["ConcatChunker"]


class ConcatChunker:
    """Concatenate documents and cut rows of exactly ``seq_len`` tokens.

    Segment ids number the document pieces of a row from 1; position ids restart at 0 for
    each piece; padding (only in a padded last row) has segment 0 and loss mask 0.
    """

    TOKEN_OFFSETS = True  # a resume may start inside a document (beamtok._src.transforms.pack.Packer)

    def __init__(self, seq_len: int, pad_id: int, remainder: str = "pad") -> None:
        self.seq_len = seq_len
        self.pad_id = pad_id
        self.remainder = remainder
        self.counts = PackCounts()
        self._pieces: list[tuple[int, int, TokenDoc]] = []  # (doc, offset, tokens)
        self._buffered = 0

    def add(self, doc: int, tokens: TokenDoc, offset: int = 0) -> Iterator[Row]:
        if offset >= len(tokens.ids):
            return
        self._pieces.append((doc, offset, _slice(tokens, offset)))
        self._buffered += len(tokens.ids) - offset
        while self._buffered >= self.seq_len:
            yield self._cut(self.seq_len)

    def finish(self) -> Iterator[Row]:
        if not self._buffered:
            return
        n = self._buffered
        if self.remainder == "drop":
            self.counts.dropped_tokens += n
            self._pieces, self._buffered = [], 0
            return
        row = self._cut(n)
        if self.remainder == "pad":
            self.counts.pad_tokens += self.seq_len - n
            row = _pad_row(row, self.seq_len, self.pad_id)
        yield row

    def _cut(self, n: int) -> Row:
        doc, start, _ = self._pieces[0]
        taken: list[TokenDoc] = []
        need = n
        while need:
            pdoc, poff, ptoks = self._pieces[0]
            if len(ptoks.ids) <= need:
                taken.append(ptoks)
                need -= len(ptoks.ids)
                self._pieces.pop(0)
            else:
                taken.append(_slice(ptoks, 0, need))
                self._pieces[0] = (pdoc, poff + need, _slice(ptoks, need))
                need = 0
        self._buffered -= n
        return _join(doc, start, taken)

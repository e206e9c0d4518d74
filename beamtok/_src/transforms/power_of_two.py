"""Power-of-two rows: every document cut into rows whose lengths are powers of two, no padding.

A document is cut into ``max_len`` rows while at least ``max_len`` tokens are left, then the
rest into the powers of two of its binary form, longest first, down to ``min_len``; fewer
than ``min_len`` tokens left over are cut off (counted as truncated tokens). Every row holds
one piece of one document (positions from 0), so no row attends across documents and no row
is padded; rows of one length batch together (``batch_tokens``), as variable sequence length
training wants. The cut of what follows any row boundary is the cut of the whole document
from there, so a cursor at a row's first token reproduces every later row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from beamtok._src.transforms.pack import PackCounts, Row, TokenDoc, _join, _slice

__all__ = ["PowerOfTwoRows", "power_of_two_cuts"]


def power_of_two_cuts(n: int, max_len: int, min_len: int) -> tuple[list[int], int]:
    """The row lengths of an ``n``-token document, and the tokens left over."""
    cuts = [max_len] * (n // max_len)
    rest = n - len(cuts) * max_len
    length = max_len >> 1
    while length >= min_len:
        if rest >= length:
            cuts.append(length)
            rest -= length
        length >>= 1
    return cuts, rest


class PowerOfTwoRows:
    """Documents into rows of power-of-two lengths between ``min_len`` and ``max_len``."""

    TOKEN_OFFSETS: ClassVar[bool] = True

    def __init__(self, max_len: int, min_len: int) -> None:
        self.max_len = max_len
        self.min_len = min_len
        self.counts = PackCounts()

    def add(self, doc: int, tokens: TokenDoc, offset: int = 0) -> Iterator[Row]:
        cuts, left = power_of_two_cuts(len(tokens.ids) - offset, self.max_len, self.min_len)
        start = offset
        for length in cuts:
            yield _join(doc, start, [_slice(tokens, start, start + length)])
            start += length
        self.counts.truncated_tokens += left

    def finish(self) -> Iterator[Row]:
        return iter(())

"""A reader's decoded row groups and open shard files, bounded and shared.

Random reads of a packed cache (the global shuffle, a mix that seeks its sources) decode a
whole row group for any row of it; the pool keeps recently decoded groups up to a byte budget
and a few files open, so rows read close together cost one decode. A reader that knows which
groups it needs next (the spread global shuffle's next window) has them decoded on a helper
thread while it reads on, within the same budget. One pool serves every
cache a reader reads at random (a mix's sources), so the budget is per reader.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as wait_for_futures
from typing import Any

from beamtok._src.base.prefetch import shared_pool
from beamtok._src.shards.rows import RowBlock

__all__ = ["DEFAULT_DECODE_BUDGET", "OPEN_FILES", "ROW_OVERHEAD", "DecodePool"]

OPEN_FILES = 16
DEFAULT_DECODE_BUDGET = 256 << 20  # bytes of decoded rows kept per reader
ROW_OVERHEAD = 400  # bytes of Python objects per decoded row, beside its arrays
# Smaller groups are not decoded ahead: their decoding is mostly Python work, which holds the
# GIL, so a helper thread would only slow the reader.
AHEAD_MIN_BYTES = 4 << 20


class DecodePool:
    """Decoded row groups (bounded in bytes, at least one kept) and open shard files (bounded
    in number), least recently used first out, shared by the row accesses of one reader."""

    def __init__(self, max_bytes: int = DEFAULT_DECODE_BUDGET, open_files: int = OPEN_FILES) -> None:
        self.max_bytes = max_bytes
        self.open_files = open_files
        self.held = 0
        self.files: OrderedDict[Any, Any] = OrderedDict()
        self.groups: OrderedDict[Any, tuple[RowBlock, int]] = OrderedDict()
        self.groups_decoded = 0
        self.files_opened = 0
        self.ahead: dict[Any, tuple[Future[RowBlock], int]] = {}  # decoding on a helper thread, with its size guessed
        self.decoded_ahead = 0  # groups taken from the helper thread
        self.ahead_min_bytes = AHEAD_MIN_BYTES

    def file(self, key: Any, opener: Callable[[], Any]) -> Any:
        if key in self.files:
            self.files.move_to_end(key)
            return self.files[key]
        opened = opener()
        self.files_opened += 1
        self.files[key] = opened
        if len(self.files) > self.open_files:
            self.files.popitem(last=False)[1].close()
        return opened

    def group(self, key: Any, decode: Callable[[], RowBlock]) -> RowBlock:
        if key in self.groups:
            self.groups.move_to_end(key)
            return self.groups[key][0]
        if key in self.ahead:
            future, _ = self.ahead.pop(key)
            block = future.result()
            self.decoded_ahead += 1
        else:
            block = decode()
        self.groups_decoded += 1
        size = _decoded_bytes(block)
        self.groups[key] = (block, size)
        self.held += size
        while self.held > self.max_bytes and len(self.groups) > 1:
            self.held -= self.groups.popitem(last=False)[1][1]
        return block

    def decode_ahead(self, key: Any, decode: Callable[[], RowBlock], keep: int) -> bool:
        """Start decoding the group ``key`` on a helper thread (``decode`` must open its own
        file: the pool's are the reader's) if it is not held or coming, making room in the
        budget by dropping least recently used groups but the ``keep`` most recent (the ones
        the reader still reads); returns whether it was started (not when the budget has no
        room beside those, nor for groups under ``ahead_min_bytes``). A group's size is guessed
        from those held. :meth:`group` takes it when asked for it."""
        if key in self.groups or key in self.ahead or not self.groups:
            return False
        guess = self.held // len(self.groups)
        if guess < self.ahead_min_bytes:
            return False
        coming = sum(size for _, size in self.ahead.values())
        while self.held + coming + guess > self.max_bytes and len(self.groups) > keep:
            self.held -= self.groups.popitem(last=False)[1][1]
        if self.held + coming + guess > self.max_bytes:
            return False
        self.ahead[key] = (shared_pool().submit(decode), guess)
        return True

    def finish_ahead(self, mine: Callable[[Any], bool]) -> None:
        """Cancel, or wait for, the decodes ahead whose keys ``mine`` picks (their files are about
        to close)."""
        for key in [key for key in self.ahead if mine(key)]:
            future, _ = self.ahead.pop(key)
            if not future.cancel():
                wait_for_futures([future])

    def close(self) -> None:
        self.finish_ahead(lambda key: True)  # a decode ahead reads a file the caller may remove next
        for pf in self.files.values():
            pf.close()
        self.files.clear()
        self.groups.clear()
        self.held = 0


def _decoded_bytes(block: RowBlock) -> int:
    return block.nbytes() + ROW_OVERHEAD * len(block)

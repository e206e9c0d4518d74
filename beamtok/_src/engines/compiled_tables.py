"""What the compiled models (``unigram_native``, ``bpe_native``) share: numba's compilation
with a disk cache where one can be written (dropped when any compiled module's source
changes: ``kernel_cache``), texts as arrays of code points, the cut of a marked text into
words, a trie of tokens and a map of integer keys, each an open-addressing table in numpy
arrays (numba reads them at native speed where a Python dict would cost a call a lookup),
the UTF-8 bytes of a character, and the buffers a call writes into, kept from call to call
and held by one thread at a time (``Workspaces``). numba comes with the ``beamtok[compiled]``
extra."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import numba
import numpy as np

from beamtok._src.engines.kernel_cache import drop_stale_kernels
from beamtok._src.engines.word_cutters import WHITE_SPACE, Marking, WordsMarking

__all__ = [
    "CHAR_BITS",
    "CodePointBuffer",
    "IntMap",
    "KeptArray",
    "Trie",
    "Workspaces",
    "byte_token_ids",
    "code_points",
    "compiled",
    "inlined",
    "put_byte_ids",
    "word_end",
]

drop_stale_kernels()  # before the first kernel below is compiled or loaded
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
CHAR_BITS = 21  # a code point's bits: a trie edge is (node << 21 | code point)


def compiled(function: Callable[..., Any]) -> Any:
    """``function`` compiled by numba, cached on disk where numba finds a writable place
    (beside this file, else the user's cache directory), else compiled in each process."""
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # "no locator available": a read-only install and no writable home
        return numba.njit(nogil=True)(function)


def inlined(function: Callable[..., Any]) -> Any:
    """``function`` compiled into each compiled function that calls it (numba's IR inlining):
    a call of a compiled function that takes arrays costs more than a short scan a piece."""
    return numba.njit(nogil=True, inline="always")(function)


def code_points(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' code points, one after another, and where each text ends."""
    chars = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    return chars, np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))


W = TypeVar("W")


class Workspaces(Generic[W]):
    """What a compiled call writes as it runs (buffers, a cache), for one thread at a time:
    the kernels run without the GIL, so a thread that finds the shared workspace in use gets
    one of its own (made on its first such call) rather than write into another's."""

    def __init__(self, make: Callable[[], W]) -> None:
        self._make = make
        self.shared = make()
        self._in_use = threading.Lock()
        self._own = threading.local()

    @contextmanager
    def one(self) -> Iterator[W]:
        """A workspace no other thread is using, for the length of the block."""
        if self._in_use.acquire(blocking=False):
            try:
                yield self.shared
            finally:
                self._in_use.release()
            return
        workspace: W | None = getattr(self._own, "workspace", None)
        if workspace is None:
            workspace = self._own.workspace = self._make()
        yield workspace


class KeptArray:
    """An array kept from call to call and grown when short: room that is not fresh pages each
    call. What is written into it is copied out before the next call."""

    def __init__(self, dtype: Any) -> None:
        self.array = np.empty(0, dtype=dtype)

    def room(self, n: int) -> np.ndarray:
        """The first ``n`` elements (a view, valid until the next call)."""
        if len(self.array) < n:
            self.array = np.empty(max(n, 2 * len(self.array)), dtype=self.array.dtype)
        return self.array[:n]


class CodePointBuffer:
    """Texts' code points written into one buffer kept from call to call. A batch of long
    texts joined and encoded at once allocates megabytes afresh each call, and every page of
    fresh memory is a fault (a large share of a compiled BPE's reading of its input);
    pieces of at most ``PIECE`` characters are encoded in memory the allocator reuses.

    ``fill`` can also mark the texts as ``Metaspace`` does (``word_cutters.SpaceMarking``;
    ``WordsMarking`` for ``WhitespaceSplit`` before it, written into a second buffer), on their
    code points: the same marking done as strings (``str.replace``, then the mark
    put first) made two new strings a text, wider than the text where it was ASCII."""

    PIECE = 1 << 14

    def __init__(self) -> None:
        self._kept = KeptArray(np.uint32)
        self._marked = KeptArray(np.uint32)

    def fill(self, texts: Sequence[str], marking: Marking | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The texts' code points (a view of the buffer, valid until the next call) and where
        each text ends, as :func:`code_points` gives them; with ``marking``, those of the
        texts marked by it."""
        if isinstance(marking, WordsMarking):  # words laid out anew: into a second buffer
            chars, ends = self.fill(texts)
            out = self._marked.room(len(chars) + len(texts))  # a text grows by one mark at most
            out_ends = np.empty(len(texts), dtype=np.int64)
            used = _mark_words(chars, ends, marking.code, WHITE_SPACE_TABLE, out, out_ends)
            return out[:used], out_ends
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        mark_first = marking.marks_first(texts) if marking is not None and marking.first else None
        code = marking.code if marking is not None else 0
        if mark_first is not None:
            lengths += np.fromiter(mark_first, dtype=np.int64, count=len(texts))
        ends = np.cumsum(lengths)
        buffer = self._kept.room(int(ends[-1]) if len(ends) else 0)
        piece, at = self.PIECE, 0
        for i, text in enumerate(texts):
            if mark_first is not None and mark_first[i]:
                buffer[at] = code
                at += 1
            n = len(text)
            for start in range(0, n, piece):
                part = text[start : start + piece] if n > piece else text
                buffer[at : at + len(part)] = np.frombuffer(part.encode("utf-32-le"), dtype=np.uint32)
                at += len(part)
        if marking is not None:
            _mark_spaces(buffer[:at], code)
        return buffer, ends


# Unicode White_Space (all below U+3001), as a table a kernel reads
WHITE_SPACE_TABLE = np.zeros(0x3001, dtype=np.bool_)
WHITE_SPACE_TABLE[[ord(c) for c in re.findall(f"[{WHITE_SPACE}]", "".join(map(chr, range(0x3001))))]] = True


@compiled
def _mark_words(
    chars: np.ndarray, ends: np.ndarray, mark: int, white: np.ndarray, out: np.ndarray, out_ends: np.ndarray
) -> int:  # pragma: no cover - compiled
    """Each text's words (runs of characters outside ``white``) written one after another
    into ``out``, each behind ``mark`` unless it starts with it; where each text ends there in
    ``out_ends``. Returns how many code points in all."""
    o = 0
    begin = 0
    limit = white.shape[0]
    for t in range(ends.shape[0]):
        end = ends[t]
        i = begin
        while i < end:
            c = chars[i]
            if c < limit and white[c]:
                i += 1
                continue
            if c != mark:
                out[o] = mark
                o += 1
            while i < end:
                c = chars[i]
                if c < limit and white[c]:
                    break
                out[o] = c
                o += 1
                i += 1
        out_ends[t] = o
        begin = end
    return o


@compiled
def _mark_spaces(chars: np.ndarray, mark: int) -> None:  # pragma: no cover - compiled
    """Each space (U+0020) in ``chars`` becomes ``mark``."""
    for i in range(chars.shape[0]):
        if chars[i] == 32:
            chars[i] = mark


@compiled
def word_end(chars: np.ndarray, start: int, end: int, cut: int, mark: int) -> int:  # pragma: no cover - compiled
    """Where the word starting at ``chars[start]`` ends in a marked text ending at ``end``: before
    the next mark (``cut`` 0), before the next mark that follows another character (1), or at the
    text's end (2); the values of ``word_cutters``' CUT_BEFORE_EVERY_MARK, CUT_BEFORE_MARK_AFTER_OTHER, NO_CUT."""
    x = start + 1
    if cut == 0:
        while x < end and chars[x] != mark:
            x += 1
    elif cut == 1:
        while x < end and not (chars[x] == mark and chars[x - 1] != mark):
            x += 1
    else:
        x = end
    return x


@compiled
def slot(key: int, shift: int) -> int:  # pragma: no cover - compiled
    """Where ``key`` starts its search in a table of 2**(64 - shift) slots."""
    return np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(shift))


@compiled
def find(keys: np.ndarray, values: np.ndarray, shift: int, key: int) -> int:  # pragma: no cover - compiled
    """The value of ``key`` (>= 0) in an open-addressing table, or -1."""
    mask = keys.shape[0] - 1
    s = slot(key, shift)
    while True:
        found = keys[s]
        if found == key:
            return values[s]
        if found == -1:
            return -1
        s = (s + 1) & mask


@compiled
def child(
    keys: np.ndarray, children: np.ndarray, shift: int, node: int, char: int
) -> int:  # pragma: no cover - compiled
    """The trie node after ``node`` on ``char``, or -1."""
    return find(keys, children, shift, (np.int64(node) << CHAR_BITS) | np.int64(char))


@compiled
def _build_trie(
    chars: np.ndarray, token_ends: np.ndarray, bits: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """A trie of the tokens (token t is ``chars[token_ends[t - 1]:token_ends[t]]``) as an
    open-addressing table of 2**bits slots, (node << 21 | char) -> child, and the token ending
    at each node (-1: none; a later duplicate overwrites an earlier one). Gives up (nodes
    -1) where the nodes would fill more than half the slots."""
    capacity = 1 << bits
    shift = 64 - bits
    keys = np.full(capacity, -1, np.int64)
    children = np.zeros(capacity, np.int32)
    token_at = np.full(capacity // 2 + 1, -1, np.int32)
    nodes = 1
    begin = 0
    for t in range(token_ends.shape[0]):
        end = token_ends[t]
        if end > begin:  # the empty token is never found
            node = 0
            for k in range(begin, end):
                key = (np.int64(node) << CHAR_BITS) | np.int64(chars[k])
                s = slot(key, shift)
                while keys[s] != -1 and keys[s] != key:
                    s = (s + 1) & (capacity - 1)
                if keys[s] == -1:
                    if nodes == capacity // 2:
                        return keys, children, token_at, -1
                    keys[s] = key
                    children[s] = nodes
                    nodes += 1
                node = children[s]
            token_at[node] = t
        begin = end
    return keys, children, token_at, nodes


@compiled
def _build_map(
    keys: np.ndarray, values: np.ndarray, bits: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """An open-addressing table of 2**bits slots: keys[i] -> values[i] (a later key overwrites)."""
    capacity = 1 << bits
    shift = 64 - bits
    table_keys = np.full(capacity, -1, np.int64)
    table_values = np.zeros(capacity, np.int64)
    for i in range(keys.shape[0]):
        s = slot(keys[i], shift)
        while table_keys[s] != -1 and table_keys[s] != keys[i]:
            s = (s + 1) & (capacity - 1)
        table_keys[s] = keys[i]
        table_values[s] = values[i]
    return table_keys, table_values


class Trie:
    """Tokens (strings) in a trie of their characters: ``token_at[node]`` is the index of
    the token ending at a node (the last of equal tokens), -1 for none; the empty token is
    never found. At least twice as many slots as nodes."""

    def __init__(self, tokens: Sequence[str]) -> None:
        chars, token_ends = code_points(tokens)
        self.bits = max(4, (2 * len(tokens)).bit_length())  # a node a token at least
        while True:
            self.keys, self.children, self.token_at, nodes = _build_trie(chars, token_ends, self.bits)
            if nodes >= 0:
                break
            self.bits += 1
        self.shift = 64 - self.bits


class IntMap:
    """Non-negative int64 keys -> non-negative int64 values, in a table at most half full."""

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        self.bits = max(4, (2 * len(keys) + 1).bit_length())
        self.keys, self.values = _build_map(
            np.asarray(keys, dtype=np.int64), np.asarray(values, dtype=np.int64), self.bits
        )
        self.shift = 64 - self.bits


@compiled
def utf8_length(char: int) -> int:  # pragma: no cover - compiled
    return 1 if char < 0x80 else 2 if char < 0x800 else 3 if char < 0x10000 else 4


@compiled
def utf8_byte(char: int, length: int, i: int) -> int:  # pragma: no cover - compiled
    """Byte ``i`` of the ``length`` UTF-8 bytes of ``char``."""
    if length == 1:
        return char
    if i == 0:
        return (0xC0, 0xE0, 0xF0)[length - 2] | (char >> (6 * (length - 1)))
    return 0x80 | ((char >> (6 * (length - 1 - i))) & 0x3F)


def byte_token_ids(token_id: Mapping[str, int], byte_fallback: bool) -> np.ndarray:
    """The id of each byte's ``<0xXX>`` token; -1 for a byte without one, and for every
    byte where byte fallback is off."""
    if not byte_fallback:
        return np.full(256, -1, dtype=np.int64)
    return np.array([token_id.get(f"<0x{b:02X}>", -1) for b in range(256)], dtype=np.int64)


@compiled
def put_byte_ids(
    chars: np.ndarray, a: int, b: int, byte_ids: np.ndarray, ids: np.ndarray, at: int
) -> int:  # pragma: no cover - compiled
    """Writes the ``<0xXX>`` ids of ``chars[a:b]``'s UTF-8 bytes at ``ids[at:]``; how many,
    or -1 (what was written not counted) when a byte has no token."""
    count = 0
    for k in range(a, b):
        n = utf8_length(chars[k])
        for i in range(n):
            byte = utf8_byte(chars[k], n, i)
            if byte_ids[byte] < 0:
                return -1
            ids[at + count] = byte_ids[byte]
            count += 1
    return count

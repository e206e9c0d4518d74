"""SentencePiece-style BPE (Llama-2's, Mistral's, Gemma's kind: byte fallback, words marked
with ``▁``) compiled with numba: texts already normalized and marked are cut into words,
each word's ids found in a word cache or computed by the rules ``tokenizers``' BPE model
follows, all in one call. numba comes with the ``beamtok[compiled]`` extra.

The rules (``tokenizers`` models/bpe), one by one:

- a word found whole in the vocabulary is that token where ``ignore_merges`` is set;
- otherwise each character is its token; a character that is none is its UTF-8 bytes'
  ``<0xXX>`` tokens where byte fallback is on and all exist (added at once, before an
  unknown token still pending: ``tokenizers``' own order), else the unknown token, one for a
  run of such characters where ``fuse_unk`` is set; with no unknown token the character is
  dropped, and with one the vocabulary lacks, the text goes to the file's model (it raises);
- then merges apply lowest rank first and, among equal ranks, leftmost first (``tokenizers``
  keeps a heap of (rank, position) and skips entries a merge made stale); a merge listed
  twice keeps its last rank.

Words are cut where the pre-tokenizer (or, with none, the argument in ``word_cutters``) cuts:
before every mark (a Metaspace that splits), or before a mark that follows another
character (``SpaceMarkWords``). A word of up to ``CACHED_CHARS`` characters is cached with
its ids; the cache starts over when full. The kernel runs without the GIL and writes the
cache and the buffers it reads and writes, so one call at a time holds them: a thread that
finds them in use encodes through a workspace of its own (made on its first such call),
never through one another thread is writing.
Models with a continuing-subword prefix, an end-of-word suffix or dropout are not taken
(``why_not``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from beamtok._src.engines.compiled_tables import (
    child,
    compiled,
    find,
    put_byte_ids,
    word_end,
)
from beamtok._src.engines.compiled_word_cache import CACHED_CHARS, cache_find, cache_put, word_hash

__all__ = ["encode_marked", "merge_room", "merge_symbols"]

LINEAR_SYMBOLS = 48  # a word of up to this many symbols merges by scanning its pairs, a longer one by a heap


@compiled
def _heap_push(heap: np.ndarray, size: int, key: int) -> int:  # pragma: no cover - compiled
    """Pushes ``key`` (rank << 32 | position) on a min-heap; the new size."""
    i = size
    heap[i] = key
    while i > 0:
        up = (i - 1) // 2
        if heap[up] <= heap[i]:
            break
        heap[up], heap[i] = heap[i], heap[up]
        i = up
    return size + 1


@compiled
def _heap_pop(heap: np.ndarray, size: int) -> int:  # pragma: no cover - compiled
    """Moves the smallest key to index ``size - 1``; the new size."""
    last = size - 1
    heap[0], heap[last] = heap[last], heap[0]
    i = 0
    while True:
        smallest = i
        left = 2 * i + 1
        if left < last and heap[left] < heap[smallest]:
            smallest = left
        if left + 1 < last and heap[left + 1] < heap[smallest]:
            smallest = left + 1
        if smallest == i:
            return last
        heap[smallest], heap[i] = heap[i], heap[smallest]
        i = smallest


@compiled
def _join(
    symbol: np.ndarray, prev: np.ndarray, following: np.ndarray, alive: np.ndarray, p: int, merged: int
) -> None:  # pragma: no cover - compiled
    """Symbol ``p`` becomes ``merged``, taking the symbol after it out of the word."""
    right = following[p]
    symbol[p] = merged
    alive[right] = False
    following[p] = following[right]
    if following[p] != -1:
        prev[following[p]] = p


@compiled
def _merge_word(
    chars: np.ndarray,
    a: int,
    b: int,
    char_dense: np.ndarray,
    char_keys: np.ndarray,
    char_ids: np.ndarray,
    char_shift: int,
    byte_ids: np.ndarray,
    unk_id: int,
    fuse_unk: bool,
    merge_keys: np.ndarray,
    merge_values: np.ndarray,
    merge_shift: int,
    symbol: np.ndarray,
    prev: np.ndarray,
    following: np.ndarray,
    alive: np.ndarray,
    heap: np.ndarray,
    pair_rank: np.ndarray,
    pair_new: np.ndarray,
    out: np.ndarray,
    at: int,
) -> int:  # pragma: no cover - compiled
    """The ids of the word ``chars[a:b]`` written at ``out[at:]``: how many, or -1 where the
    file's model must be asked (an unknown token it lacks)."""
    n = 0
    pending = False  # an unknown token not yet added
    for k in range(a, b):
        c = chars[k]
        t = char_dense[c] if c < char_dense.shape[0] else find(char_keys, char_ids, char_shift, np.int64(c))
        if t >= 0:
            if pending:
                symbol[n] = unk_id
                n += 1
                pending = False
            symbol[n] = t
            n += 1
            continue
        written = put_byte_ids(chars, k, k + 1, byte_ids, symbol, n)
        if written >= 0:  # byte fallback, before a pending unknown token (tokenizers' order)
            n += written
            continue
        if unk_id == -1:
            continue  # no unknown token: the character is dropped
        if unk_id == -2:
            return -1  # an unknown token the vocabulary lacks: tokenizers raises
        if pending and not fuse_unk:
            symbol[n] = unk_id
            n += 1
        pending = True
    if pending:
        symbol[n] = unk_id
        n += 1
    if n == 0:
        return 0  # every character dropped (no unknown token)
    return merge_symbols(
        n, merge_keys, merge_values, merge_shift, symbol, prev, following, alive, heap, pair_rank, pair_new, out, at
    )


@compiled
def merge_room(text_ends: np.ndarray) -> tuple[np.ndarray, ...]:  # pragma: no cover - compiled
    """What :func:`merge_symbols` works in, for any word of the texts ending at ``text_ends``:
    symbols, their links and liveness, a heap, and each pair's rank and token."""
    longest = 0
    begin = 0
    for t in range(text_ends.shape[0]):
        longest = max(longest, text_ends[t] - begin)
        begin = text_ends[t]
    room = 4 * longest + 1  # a character is at most 4 byte tokens
    return (
        np.empty(room, np.int64),
        np.empty(room, np.int64),
        np.empty(room, np.int64),
        np.empty(room, np.bool_),
        np.empty(4 * room, np.int64),  # the heap: each merge pushes at most two entries
        np.empty(room, np.int64),
        np.empty(room, np.int64),
    )


@compiled
def merge_symbols(
    n: int,
    merge_keys: np.ndarray,
    merge_values: np.ndarray,
    merge_shift: int,
    symbol: np.ndarray,
    prev: np.ndarray,
    following: np.ndarray,
    alive: np.ndarray,
    heap: np.ndarray,
    pair_rank: np.ndarray,
    pair_new: np.ndarray,
    out: np.ndarray,
    at: int,
) -> int:  # pragma: no cover - compiled
    """Merges the word whose first ids are ``symbol[:n]`` (``n`` > 0) by the merges' ranks
    and writes what is left at ``out[at:]``: how many."""
    for i in range(n):
        prev[i] = i - 1
        following[i] = i + 1 if i + 1 < n else -1
        alive[i] = True
    if n <= LINEAR_SYMBOLS:
        _merge_by_scan(symbol, prev, following, alive, n, merge_keys, merge_values, merge_shift, pair_rank, pair_new)
    else:
        _merge_by_heap(symbol, prev, following, alive, n, merge_keys, merge_values, merge_shift, heap)
    count = 0
    for i in range(n):
        if alive[i]:
            out[at + count] = symbol[i]
            count += 1
    return count


@compiled
def _merge_by_scan(
    symbol: np.ndarray,
    prev: np.ndarray,
    following: np.ndarray,
    alive: np.ndarray,
    n: int,
    merge_keys: np.ndarray,
    merge_values: np.ndarray,
    merge_shift: int,
    pair_rank: np.ndarray,
    pair_new: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Merges a short word: each step scans the pairs for the lowest rank, leftmost first
    (the heap's order), and looks up only the two pairs a merge makes."""
    none = np.int64(1) << 62
    for i in range(n):
        pair_rank[i] = none
        if i + 1 < n:
            value = find(merge_keys, merge_values, merge_shift, (np.int64(symbol[i]) << 32) | np.int64(symbol[i + 1]))
            if value >= 0:
                pair_rank[i], pair_new[i] = value >> 32, value & 0xFFFFFFFF
    while True:
        best, p = none, -1
        i = 0  # the first symbol is never merged away
        while i != -1:
            if pair_rank[i] < best:
                best, p = pair_rank[i], i
            i = following[i]
        if p < 0:
            return
        _join(symbol, prev, following, alive, p, pair_new[p])
        pair_rank[p] = none
        if following[p] != -1:
            value = find(
                merge_keys, merge_values, merge_shift, (np.int64(symbol[p]) << 32) | np.int64(symbol[following[p]])
            )
            if value >= 0:
                pair_rank[p], pair_new[p] = value >> 32, value & 0xFFFFFFFF
        if prev[p] >= 0:
            q = prev[p]
            pair_rank[q] = none
            value = find(merge_keys, merge_values, merge_shift, (np.int64(symbol[q]) << 32) | np.int64(symbol[p]))
            if value >= 0:
                pair_rank[q], pair_new[q] = value >> 32, value & 0xFFFFFFFF


@compiled
def _merge_by_heap(
    symbol: np.ndarray,
    prev: np.ndarray,
    following: np.ndarray,
    alive: np.ndarray,
    n: int,
    merge_keys: np.ndarray,
    merge_values: np.ndarray,
    merge_shift: int,
    heap: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Merges a long word as ``tokenizers`` does: a heap of (rank, position), entries a
    merge made stale skipped."""
    size = 0
    for i in range(n - 1):
        value = find(merge_keys, merge_values, merge_shift, (np.int64(symbol[i]) << 32) | np.int64(symbol[i + 1]))
        if value >= 0:
            size = _heap_push(heap, size, (value >> 32 << 32) | i)
    while size > 0:
        size = _heap_pop(heap, size)
        rank, p = heap[size] >> 32, heap[size] & 0xFFFFFFFF
        if not alive[p] or following[p] == -1:
            continue
        value = find(
            merge_keys, merge_values, merge_shift, (np.int64(symbol[p]) << 32) | np.int64(symbol[following[p]])
        )
        if value < 0 or value >> 32 != rank:
            continue  # a stale entry: the pair at p changed since it was pushed (a rank is one pair's)
        _join(symbol, prev, following, alive, p, value & 0xFFFFFFFF)
        if prev[p] >= 0:
            value = find(merge_keys, merge_values, merge_shift, (np.int64(symbol[prev[p]]) << 32) | np.int64(symbol[p]))
            if value >= 0:
                size = _heap_push(heap, size, (value >> 32 << 32) | prev[p])
        if following[p] != -1:
            value = find(
                merge_keys, merge_values, merge_shift, (np.int64(symbol[p]) << 32) | np.int64(symbol[following[p]])
            )
            if value >= 0:
                size = _heap_push(heap, size, (value >> 32 << 32) | p)


@compiled
def encode_marked(
    chars: np.ndarray,
    text_ends: np.ndarray,
    cut: int,
    mark: int,
    tables: tuple[Any, ...],
    cache: tuple[Any, ...],
    out: np.ndarray,
    counts: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Each text's ids one text after another in ``out``; ``counts[t]`` is how many, -1 for a
    text the file's model must be given."""
    (char_dense, char_keys, char_ids, char_shift, byte_ids, unk_id, fuse_unk, merge_keys, merge_values, merge_shift,
     whole, trie_keys, trie_children, trie_shift, trie_ids) = tables  # fmt: skip
    symbol, prev, following, alive, heap, pair_rank, pair_new = merge_room(text_ends)
    o = 0
    begin = 0
    for t in range(text_ends.shape[0]):
        end = text_ends[t]
        start = o
        asked = False
        w = begin
        while w < end and not asked:
            x = word_end(chars, w, end, cut, mark)  # the word is chars[w:x]
            count = -1
            if whole:  # ignore_merges: a word that is a token is that token
                node = 0
                for k in range(w, x):
                    node = child(trie_keys, trie_children, trie_shift, node, chars[k])
                    if node < 0:
                        break
                if node >= 0 and trie_ids[node] >= 0:
                    out[o] = trie_ids[node]
                    count = 1
            cacheable = count < 0 and x - w <= CACHED_CHARS
            h = 0
            if cacheable:
                h = word_hash(chars, w, x)
                count = cache_find(cache, chars, w, x, h, out, o)
            if count < 0:
                count = _merge_word(chars, w, x, char_dense, char_keys, char_ids, char_shift, byte_ids, unk_id, fuse_unk, merge_keys,
                                    merge_values, merge_shift, symbol, prev, following, alive, heap, pair_rank, pair_new, out, o)  # fmt: skip
                if count < 0:
                    asked = True
                    break
                if cacheable:
                    cache_put(cache, chars, w, x, h, out, o, count)
            o += count
            w = x
        if asked:
            o = start
            counts[t] = -1
        else:
            counts[t] = o - start
        begin = end

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

import operator
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from beamtok._src.engines.compiled_tables import (
    CodePointBuffer,
    IntMap,
    KeptArray,
    Trie,
    Workspaces,
    byte_token_ids,
    child,
    compiled,
    find,
    put_byte_ids,
    word_end,
)
from beamtok._src.engines.compiled_word_cache import CACHED_CHARS, cache_find, cache_put, new_word_cache, word_hash
from beamtok._src.engines.word_cutters import CUT_BEFORE_EVERY_MARK, CUT_BEFORE_MARK_AFTER_OTHER, NO_CUT, Marking

__all__ = ["NativeBPE", "merge_room", "merge_symbols"]

LINEAR_SYMBOLS = 48  # a word of up to this many symbols merges by scanning its pairs, a longer one by a heap
CACHE_BITS = 19  # slots of the word cache; it holds at most half as many words


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
def _encode(
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


class NativeBPE:
    """The ids a ``tokenizers`` BPE model (its serialized ``model`` section) gives texts
    marked and cut as ``cut`` says, computed in compiled code (see the module docstring)."""

    def __init__(self, model: dict[str, Any], mark: str, cut: int) -> None:
        why = self.why_not(model)
        if why is not None:
            raise ValueError(why)
        if cut not in (CUT_BEFORE_EVERY_MARK, CUT_BEFORE_MARK_AFTER_OTHER, NO_CUT) or len(mark) != 1:
            raise ValueError(f"no such cut: {cut} at {mark!r}")
        self.cut, self.mark = cut, ord(mark)
        vocab: dict[str, int] = model["vocab"]
        singles = [(ord(token), i) for token, i in vocab.items() if len(token) == 1]
        chars = IntMap(
            np.array([c for c, _ in singles], dtype=np.int64), np.array([i for _, i in singles], dtype=np.int64)
        )
        char_dense = np.full(
            1 << 16, -1, dtype=np.int64
        )  # the Basic Multilingual Plane read directly, the rest from the map
        for c, i in singles:
            if c < 1 << 16:
                char_dense[c] = i
        byte_ids = byte_token_ids(vocab, bool(model.get("byte_fallback")))
        unk = model.get("unk_token")
        unk_id = -1 if unk is None else vocab.get(unk, -2)
        merges = IntMap(*self.merge_pairs(model, vocab))
        whole = bool(model.get("ignore_merges"))
        trie = Trie(list(vocab) if whole else [])  # a token's index in the vocabulary's order
        ids = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))
        trie_ids = (
            np.where(trie.token_at >= 0, ids[np.maximum(trie.token_at, 0)], -1)
            if whole
            else np.full(trie.token_at.shape[0], -1, dtype=np.int64)
        )
        self.tables = (char_dense, chars.keys, chars.values, chars.shift, byte_ids, unk_id, bool(model.get("fuse_unk")), merges.keys, merges.values, merges.shift,
                       whole, trie.keys, trie.children, trie.shift, trie_ids)  # fmt: skip
        self._workspaces = Workspaces(_Workspace)

    @staticmethod
    def why_not(model: dict[str, Any]) -> str | None:
        """Why this BPE model is not compiled here (None: it is)."""
        if model.get("type") != "BPE":
            return f"its model is {model.get('type')}, not BPE"
        for option in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
            if model.get(option):
                return f"its BPE has {option} set"
        vocab = model.get("vocab")
        if not isinstance(vocab, dict):
            return "its BPE vocabulary is not a mapping of tokens to ids"
        if len(set(vocab.values())) != len(vocab):
            return "two tokens of its BPE vocabulary share an id"
        return None

    @staticmethod
    def merge_pairs(model: dict[str, Any], vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """(left id << 32 | right id) -> (rank << 32 | merged id), in the file's order."""
        pairs = [merge.split(" ", 1) if isinstance(merge, str) else merge for merge in model.get("merges") or []]
        lefts, rights = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
        id_of, count = vocab.__getitem__, len(pairs)
        left = np.fromiter(map(id_of, lefts), dtype=np.int64, count=count)
        right = np.fromiter(map(id_of, rights), dtype=np.int64, count=count)
        merged = np.fromiter(map(id_of, map(operator.add, lefts, rights)), dtype=np.int64, count=count)
        return left << 32 | right, np.arange(count, dtype=np.int64) << 32 | merged

    @property
    def cache(self) -> tuple[Any, ...]:
        """The word cache (of the workspace calls use unless another thread is in it)."""
        return self._workspaces.shared.cache

    def encode(self, marked: Sequence[str], marking: Marking | None = None) -> list[np.ndarray | None]:
        """Each text's ids (a text normalized and marked, as the pre-tokenizer sees it, or
        normalized only, for ``marking`` to mark); None for a text the file itself must encode
        (a word needs an unknown token the vocabulary lacks: ``tokenizers`` raises)."""
        with self._workspaces.one() as workspace:
            chars, text_ends = workspace.chars.fill(marked, marking)
            out = workspace.ids.room(4 * len(chars))  # a character is at most 4 byte tokens
            counts = np.empty(len(marked), dtype=np.int64)
            _encode(chars, text_ends, self.cut, self.mark, self.tables, workspace.cache, out, counts)
            asked = counts < 0
            ends = np.concatenate(([0], np.cumsum(np.where(asked, 0, counts)))).tolist()
            ids = out[: ends[-1]].astype(np.int32)  # copied out of the workspace
        result: list[np.ndarray | None] = [ids[a:b] for a, b in pairwise(ends)]
        for i in np.flatnonzero(asked).tolist():
            result[i] = None
        return result


class _Workspace:
    """What one call at a time encodes through: a word cache, and buffers kept from call to
    call (the texts' code points, the ids before they are copied out), so a call faults in no
    fresh memory once the buffers have grown to its size."""

    def __init__(self) -> None:
        self.cache = new_word_cache(CACHE_BITS)
        self.chars = CodePointBuffer()
        self.ids = KeptArray(np.int64)

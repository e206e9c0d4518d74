"""A Unigram model's segmentation of words, compiled with numba, giving the ids the
``tokenizers`` Unigram model gives each word (its ``tokenize``) at ~0.2 us a word, against
~3.5 us for the model's own call from Python. Every word is segmented (no cache is needed at
that speed, so none is kept). numba comes with the ``beamtok[unigram]`` extra; without it the
cached-words engine (``cached_words``) gives new words to the file's model one by one.

What makes the ids the same, rule by rule, as ``tokenizers`` (models/unigram) computes them:

- the pieces are every vocabulary token but the empty one, found in a trie of their
  characters (``tokenizers`` walks a trie of UTF-8 bytes from character boundaries; a token
  is whole characters, so the same tokens match); a token written twice is the id of its
  last entry, with that entry's score;
- the best path to each character boundary is a sum of scores in float64, each candidate
  added as ``score + best path to its start``; candidates are visited by start, then by
  length, and one replaces the best only when strictly greater (so on a tie the earliest
  start wins: the rule sentencepiece breaks in float32 and kitoken otherwise);
- a character that is no piece alone gets an unknown node of score ``min score - 10``;
  with no unknown id, a word that needs one is given to the file's model (which raises);
- walking back, runs of nodes with the unknown id (also a literal ``<unk>`` in the text) are
  fused; a fused text that is a token is that token, else its UTF-8 bytes' ``<0xXX>`` tokens
  where byte fallback is on and all exist, else the unknown id.

Words come as one array of code points; the ids of all go back in one array."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, pairwise
from typing import Any

import numba
import numpy as np

__all__ = ["NativeUnigram"]

UNKNOWN_PENALTY = 10.0  # an unknown character scores the lowest piece's score minus this
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_CHAR_BITS = 21  # a code point's bits: a trie edge is (node << 21 | code point)


def _compiled(function: Callable[..., Any]) -> Any:
    """``function`` compiled by numba, cached on disk where numba finds a writable place
    (beside this file, else the user's cache directory), else compiled in each process."""
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError:  # "no locator available": a read-only install and no writable home
        return numba.njit(nogil=True)(function)


@_compiled
def _slot(key: int, shift: int) -> int:  # pragma: no cover - compiled
    return np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(shift))


@_compiled
def _child(keys: np.ndarray, children: np.ndarray, shift: int, node: int, char: int) -> int:  # pragma: no cover - compiled
    """The trie node after ``node`` on ``char``, or -1."""
    key = (np.int64(node) << _CHAR_BITS) | np.int64(char)
    mask = keys.shape[0] - 1
    s = _slot(key, shift)
    while True:
        found = keys[s]
        if found == key:
            return children[s]
        if found == -1:
            return -1
        s = (s + 1) & mask


@_compiled
def _build_trie(chars: np.ndarray, token_ends: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
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
                key = (np.int64(node) << _CHAR_BITS) | np.int64(chars[k])
                s = _slot(key, shift)
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
    return keys, children, token_at[:nodes], nodes


@_compiled
def _utf8_length(char: int) -> int:  # pragma: no cover - compiled
    return 1 if char < 0x80 else 2 if char < 0x800 else 3 if char < 0x10000 else 4


@_compiled
def _put_bytes(chars: np.ndarray, a: int, b: int, byte_ids: np.ndarray, ids: np.ndarray, at: int) -> int:  # pragma: no cover - compiled
    """Writes the ``<0xXX>`` ids of ``chars[a:b]``'s UTF-8 bytes at ``ids[at:]``; how many,
    or -1 (nothing written) when a byte has no token."""
    count = 0
    for k in range(a, b):
        c = chars[k]
        n = _utf8_length(c)
        for i in range(n):
            if n == 1:
                byte = c
            elif i == 0:
                byte = (0xC0, 0xE0, 0xF0)[n - 2] | (c >> (6 * (n - 1)))
            else:
                byte = 0x80 | ((c >> (6 * (n - 1 - i))) & 0x3F)
            if byte_ids[byte] < 0:
                return -1
            ids[at + count] = byte_ids[byte]
            count += 1
    return count


@_compiled
def _segment(
    chars: np.ndarray,
    word_ends: np.ndarray,
    keys: np.ndarray,
    children: np.ndarray,
    shift: int,
    token_at: np.ndarray,
    scores: np.ndarray,
    unk_id: int,
    unk_score: float,
    byte_ids: np.ndarray,
    ids: np.ndarray,
    counts: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """Each word ``chars[word_ends[w - 1]:word_ends[w]]``'s ids, one word after another in
    ``ids``; ``counts[w]`` is how many, -1 for a word the file's model must be asked about.
    Returns how many ids in all."""
    longest = 0
    begin = 0
    for w in range(word_ends.shape[0]):
        longest = max(longest, word_ends[w] - begin)
        begin = word_ends[w]
    best = np.zeros(longest + 1, np.float64)
    came_from = np.full(longest + 1, -1, np.int64)
    node_id = np.zeros(longest + 1, np.int32)
    piece_start = np.zeros(longest + 1, np.int64)
    piece_end = np.zeros(longest + 1, np.int64)
    piece_id = np.zeros(longest + 1, np.int32)
    out = 0
    base = 0
    for w in range(word_ends.shape[0]):
        size = word_ends[w] - base
        came_from[: size + 1] = -1
        best[0] = 0.0
        ask_model = False
        for at in range(size):
            so_far = best[at]
            single = False
            node = 0
            for k in range(at, size):
                node = _child(keys, children, shift, node, chars[base + k])
                if node < 0:
                    break
                t = token_at[node]
                if t >= 0:
                    end = k + 1
                    score = scores[t] + so_far
                    if came_from[end] == -1 or score > best[end]:
                        best[end] = score
                        came_from[end] = at
                        node_id[end] = t
                    if end == at + 1:
                        single = True
            if not single:
                score = unk_score + so_far
                if came_from[at + 1] == -1 or score > best[at + 1]:
                    if unk_id < 0:
                        ask_model = True
                        break
                    best[at + 1] = score
                    came_from[at + 1] = at
                    node_id[at + 1] = unk_id
        if ask_model:
            counts[w] = -1
            base = word_ends[w]
            continue
        pieces = 0
        end = size
        while end > 0:
            begin = came_from[end]
            if node_id[end] == unk_id and pieces > 0 and piece_id[pieces - 1] == unk_id:
                piece_start[pieces - 1] = begin  # fused with the unknown run after it
            else:
                piece_start[pieces] = begin
                piece_end[pieces] = end
                piece_id[pieces] = node_id[end]
                pieces += 1
            end = begin
        count = 0
        for p in range(pieces - 1, -1, -1):
            t = piece_id[p]
            if t == unk_id:
                a, b = base + piece_start[p], base + piece_end[p]
                node = 0
                for k in range(a, b):
                    node = _child(keys, children, shift, node, chars[k])
                    if node < 0:
                        break
                t = token_at[node] if node >= 0 else -1
                if t < 0:
                    written = _put_bytes(chars, a, b, byte_ids, ids, out + count)
                    if written >= 0:
                        count += written
                        continue
                    t = unk_id
            ids[out + count] = t
            count += 1
        out += count
        counts[w] = count
        base = word_ends[w]
    return out


def _code_points(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The texts' code points, one after another, and where each text ends."""
    chars = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    return chars, np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))


class NativeUnigram:
    """The ids a ``tokenizers`` Unigram model (its serialized ``model`` section) gives words,
    computed in compiled code (see the module docstring for the rules followed)."""

    def __init__(self, model: dict[str, Any], ask_model: Callable[[Sequence[str]], np.ndarray]) -> None:
        """``model``: the serialized model; ``ask_model(words)``: a text's ids from the file's
        own model, for a text with a word that needs an unknown id the model lacks."""
        self.ask_model = ask_model
        vocab = model["vocab"]
        if not vocab:
            raise ValueError("a Unigram model with an empty vocabulary")
        chars, token_ends = _code_points([token for token, _ in vocab])
        self.scores = np.array([score for _, score in vocab], dtype=np.float64)
        self.unk_id = -1 if model.get("unk_id") is None else int(model["unk_id"])
        self.unk_score = float(self.scores.min()) - UNKNOWN_PENALTY
        last_id = {token: i for i, (token, _) in enumerate(vocab)}
        self.byte_ids = np.full(256, -1, dtype=np.int32)
        if model.get("byte_fallback"):
            for byte in range(256):
                self.byte_ids[byte] = last_id.get(f"<0x{byte:02X}>", -1)
        # at least twice as many slots as nodes: a trie has at least a node a token, and the
        # table doubles until the nodes fit
        self.bits = max(4, (2 * len(vocab)).bit_length())
        while True:
            self.keys, self.children, self.token_at, nodes = _build_trie(chars, token_ends, self.bits)
            if nodes >= 0:
                break
            self.bits += 1

    def encode(self, texts_words: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Each text's ids (a text given as its words); a text with a word the model must be
        asked about (an unknown character and no unknown id) goes to ``ask_model``."""
        words = list(chain.from_iterable(texts_words))
        chars, word_ends = _code_points(words)
        per_char = 4 if self.byte_ids.max() >= 0 else 1  # a piece is a character or more, or a byte of one
        ids = np.empty(per_char * len(chars), dtype=np.int32)
        counts = np.empty(len(words), dtype=np.int64)
        _segment(chars, word_ends, self.keys, self.children, 64 - self.bits, self.token_at, self.scores, self.unk_id, self.unk_score, self.byte_ids, ids, counts)
        asked = counts < 0
        id_ends = np.concatenate(([0], np.cumsum(np.where(asked, 0, counts))))
        text_ends = np.concatenate(([0], np.cumsum(np.fromiter(map(len, texts_words), dtype=np.int64, count=len(texts_words)))))
        bounds = id_ends[text_ends].tolist()
        out = [ids[a:b] for a, b in pairwise(bounds)]
        if asked.any():
            for i, (first, last) in enumerate(pairwise(text_ends.tolist())):
                if asked[first:last].any():
                    out[i] = self.ask_model(texts_words[i])
        return out

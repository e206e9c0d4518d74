"""A Unigram model's segmentation of words, compiled with numba, giving the ids the
``tokenizers`` Unigram model gives each word (its ``tokenize``), at a small part of the cost
of the model's own call from Python. Every word is segmented (no cache is needed at that
speed, so none is kept). numba comes with the ``beamtok[compiled]`` extra; without it the
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

Words come as one array of code points; the ids of all go back in one array. Where the
pre-tokenizer's words are a marked text cut before marks (``word_cutters``' ``native_cut``),
the texts come marked and are cut here (``encode_marked``), with no Python string a word."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, pairwise
from typing import Any

import numpy as np

from beamtok._src.engines.compiled_tables import (
    CodePointBuffer,
    KeptArray,
    Trie,
    Workspaces,
    byte_token_ids,
    child,
    compiled,
    put_byte_ids,
    word_end,
)
from beamtok._src.engines.word_cutters import Marking

__all__ = ["NativeUnigram"]

UNKNOWN_PENALTY = 10.0  # an unknown character scores the lowest piece's score minus this


@compiled
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
                node = child(keys, children, shift, node, chars[base + k])
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
                    node = child(keys, children, shift, node, chars[k])
                    if node < 0:
                        break
                t = token_at[node] if node >= 0 else -1
                if t < 0:
                    written = put_byte_ids(chars, a, b, byte_ids, ids, out + count)
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


@compiled
def _cut_marked(
    chars: np.ndarray, text_ends: np.ndarray, cut: int, mark: int, word_ends: np.ndarray, text_word_ends: np.ndarray
) -> int:  # pragma: no cover - compiled
    """The words of each marked text (``compiled_tables.word_end``): where each ends, in
    ``word_ends``, and the words up to each text's end, in ``text_word_ends``. Returns how many
    words in all."""
    words = 0
    begin = 0
    for t in range(text_ends.shape[0]):
        end = text_ends[t]
        w = begin
        while w < end:
            w = word_end(chars, w, end, cut, mark)
            word_ends[words] = w
            words += 1
        text_word_ends[t] = words
        begin = end
    return words


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
        self.scores = np.array([score for _, score in vocab], dtype=np.float64)
        self.unk_id = -1 if model.get("unk_id") is None else int(model["unk_id"])
        self.unk_score = float(self.scores.min()) - UNKNOWN_PENALTY
        last_id = {token: i for i, (token, _) in enumerate(vocab)}
        self.byte_ids = byte_token_ids(last_id, bool(model.get("byte_fallback")))
        self._ids_per_char = 4 if self.byte_ids.max() >= 0 else 1  # a piece is a character or more, or a byte of one
        self.trie = Trie([token for token, _ in vocab])
        self._workspaces = Workspaces(_Buffers)

    def encode(self, texts_words: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Each text's ids (a text given as its words); a text with a word the model must be
        asked about (an unknown character and no unknown id) goes to ``ask_model``."""
        words = list(chain.from_iterable(texts_words))
        text_word_ends = np.cumsum(np.fromiter(map(len, texts_words), dtype=np.int64, count=len(texts_words)))
        with self._workspaces.one() as buffers:
            chars, word_ends = buffers.chars.fill(words)
            out = self._texts_ids(chars, word_ends, text_word_ends, buffers)
        return [ids if ids is not None else self.ask_model(texts_words[i]) for i, ids in enumerate(out)]

    def encode_marked(
        self, marked: Sequence[str], cut: int, mark: str, marking: Marking | None = None
    ) -> list[np.ndarray | None]:
        """Each marked text's ids (or normalized text's, for ``marking`` to mark), its words
        cut as ``cut`` says (``word_cutters``' ``native_cut``) before ``mark``; None for a text
        with a word the model must be asked about."""
        with self._workspaces.one() as buffers:
            chars, text_ends = buffers.chars.fill(marked, marking)
            word_ends = buffers.word_ends.room(len(chars))  # a word is a character or more
            text_word_ends = np.empty(len(marked), dtype=np.int64)
            words = _cut_marked(chars, text_ends, cut, ord(mark), word_ends, text_word_ends)
            return self._texts_ids(chars, word_ends[:words], text_word_ends, buffers)

    def _texts_ids(
        self, chars: np.ndarray, word_ends: np.ndarray, text_word_ends: np.ndarray, buffers: _Buffers
    ) -> list[np.ndarray | None]:
        """Each text's ids (its words end where ``text_word_ends`` says; the ids copied out of
        ``buffers``), None for a text with a word the model must be asked about."""
        written = buffers.ids.room(self._ids_per_char * len(chars))
        counts = np.empty(len(word_ends), dtype=np.int64)
        _segment(
            chars,
            word_ends,
            self.trie.keys,
            self.trie.children,
            self.trie.shift,
            self.trie.token_at,
            self.scores,
            self.unk_id,
            self.unk_score,
            self.byte_ids,
            written,
            counts,
        )
        asked = counts < 0
        id_ends = np.concatenate(([0], np.cumsum(np.where(asked, 0, counts))))
        ids = written[: int(id_ends[-1])].copy()
        word_bounds = np.concatenate(([0], text_word_ends))
        out: list[np.ndarray | None] = [ids[a:b] for a, b in pairwise(id_ends[word_bounds].tolist())]
        if asked.any():
            for i, (first, last) in enumerate(pairwise(word_bounds.tolist())):
                if asked[first:last].any():
                    out[i] = None
        return out


class _Buffers:
    """What one call at a time writes into, kept from call to call (``compiled_tables.Workspaces``:
    the kernels run without the GIL): the texts' code points, where their words end, and the
    ids before they are copied out. Fresh arrays each call faulted in ~8,400 pages a pass over
    the code benchmark corpus under T5's model."""

    def __init__(self) -> None:
        self.chars = CodePointBuffer()
        self.word_ends = KeptArray(np.int64)
        self.ids = KeptArray(np.int32)

"""Byte-level BPE of the cl100k kind compiled with numba: each text cut by the file's own split
(``byte_level_split``), each piece's ids found in a word cache or merged from its UTF-8 bytes
by the rules ``tokenizers``' BPE model follows (``bpe_native.merge_symbols``: the listed
merges, lowest rank first, leftmost among equals), all in one call without the GIL.

A piece is its bytes' tokens (ByteLevel maps each byte to one character, and every one of the
256 is a token of a byte-level vocabulary; a file lacking one is refused), merged; where the
file sets ``ignore_merges``, a piece that is a token whole is that token. Pieces of up to
``CACHED_CHARS`` characters are cached by their code points. A text holding a character whose
class is not yet known stops the kernel for that text; its characters are classified
(``CharClasses.learn``) and the text is encoded again. A text holding a character the cut
does not take is left to the file (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from beamtok._src.engines.bpe_native import merge_room, merge_symbols
from beamtok._src.engines.bpe_native_encoder import NativeBPE
from beamtok._src.engines.byte_level_split import KIND, ROUTED, UNKNOWN, piece_end
from beamtok._src.engines.char_classes import CharClasses
from beamtok._src.engines.compiled_tables import (
    CodePointBuffer,
    IntMap,
    KeptArray,
    Trie,
    Workspaces,
    child,
    compiled,
    utf8_byte,
    utf8_length,
)
from beamtok._src.engines.compiled_word_cache import CACHED_CHARS, cache_find, cache_put, new_word_cache, word_hash
from beamtok._src.engines.ranks import byte_encoder, missing_byte_token

__all__ = ["NativeByteLevelBPE"]

CACHE_BITS = 19  # slots of the word cache; it holds at most half as many words
ASK_CLASSES, ASK_FILE = -2, -1  # a text's count: a character of unknown class; one the cut does not take


@compiled
def _known(chars: np.ndarray, a: int, b: int, table: np.ndarray) -> int:  # pragma: no cover - compiled
    """0 where every character of ``chars[a:b]`` has a class the cut takes, else ASK_CLASSES
    or ASK_FILE."""
    for k in range(a, b):
        kind = table[chars[k]] & KIND
        if kind == UNKNOWN:
            return ASK_CLASSES
        if kind == ROUTED:
            return ASK_FILE
    return 0


@compiled
def _encode(
    chars: np.ndarray,
    text_ends: np.ndarray,
    table: np.ndarray,
    numbers: int,
    shape: int,
    tables: tuple[Any, ...],
    cache: tuple[Any, ...],
    out: np.ndarray,
    counts: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Each text's ids one text after another in ``out``; ``counts[t]`` is how many, or
    ASK_CLASSES / ASK_FILE (nothing written)."""
    (
        byte_ids,
        byte_chars,
        merge_keys,
        merge_values,
        merge_shift,
        whole,
        trie_keys,
        trie_children,
        trie_shift,
        trie_ids,
    ) = tables
    symbol, prev, following, alive, heap, pair_rank, pair_new = merge_room(text_ends)
    o = 0
    begin = 0
    for t in range(text_ends.shape[0]):
        end = text_ends[t]
        verdict = _known(chars, begin, end, table)
        if verdict != 0:
            counts[t] = verdict
            begin = end
            continue
        start = o
        w = begin
        while w < end:
            x = piece_end(chars, w, end, table, numbers, shape)
            cacheable = x - w <= CACHED_CHARS
            h = 0
            count = -1
            if cacheable:
                h = word_hash(chars, w, x)
                count = cache_find(cache, chars, w, x, h, out, o)
            if count < 0:
                n = 0
                node = 0
                for k in range(w, x):
                    length = utf8_length(chars[k])
                    for i in range(length):
                        byte = utf8_byte(chars[k], length, i)
                        symbol[n] = byte_ids[byte]
                        n += 1
                        if whole and node >= 0:
                            node = child(trie_keys, trie_children, trie_shift, node, byte_chars[byte])
                if whole and node >= 0 and trie_ids[node] >= 0:
                    out[o] = trie_ids[node]  # ignore_merges: a piece that is a token is that token
                    count = 1
                else:
                    count = merge_symbols(n, merge_keys, merge_values, merge_shift, symbol, prev, following, alive, heap,
                                          pair_rank, pair_new, out, o)  # fmt: skip
                if cacheable:
                    cache_put(cache, chars, w, x, h, out, o, count)
            o += count
            w = x
        counts[t] = o - start
        begin = end


class NativeByteLevelBPE:
    """The ids a ``tokenizers`` byte-level BPE model (its serialized ``model`` section) gives
    texts cut by ``classes``' split, computed in compiled code (see the module docstring)."""

    def __init__(self, model: dict[str, Any], classes: CharClasses) -> None:
        why = self.why_not(model)
        if why is not None:
            raise ValueError(why)
        self.classes = classes
        vocab: dict[str, int] = model["vocab"]
        to_char = byte_encoder()
        byte_ids = np.array([vocab[to_char[b]] for b in range(256)], dtype=np.int64)
        byte_chars = np.array([ord(to_char[b]) for b in range(256)], dtype=np.int64)
        merges = _merge_map(model, vocab)
        whole = bool(model.get("ignore_merges"))
        trie = Trie(list(vocab) if whole else [])
        ids = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))
        trie_ids = (
            np.where(trie.token_at >= 0, ids[np.maximum(trie.token_at, 0)], -1)
            if whole
            else np.full(trie.token_at.shape[0], -1, dtype=np.int64)
        )
        self.tables = (byte_ids, byte_chars, merges[0], merges[1], merges[2], whole, trie.keys, trie.children, trie.shift, trie_ids)  # fmt: skip
        self._workspaces = Workspaces(_Workspace)

    @staticmethod
    def why_not(model: dict[str, Any]) -> str | None:
        """Why this model is not compiled here (None: it is)."""
        why = NativeBPE.why_not(model)
        if why is not None:
            return why
        return missing_byte_token(model["vocab"])

    def encode(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """Each text's ids (texts as the split sees them: normalized, added tokens taken
        out); None for a text holding a character the cut does not take. Texts that met a
        character of unknown class are encoded again once the batch's characters are learned."""
        with self._workspaces.one() as workspace:
            result, counts, chars = self._encode_through(texts, workspace)
            again = np.flatnonzero(counts == ASK_CLASSES).tolist()
            if again:
                self.classes.learn(np.unique(chars))  # before the buffer is written again
                retried, _, _ = self._encode_through([texts[i] for i in again], workspace)
                for i, ids in zip(again, retried):
                    result[i] = ids
            return result

    def _encode_through(
        self, texts: Sequence[str], workspace: _Workspace
    ) -> tuple[list[np.ndarray | None], np.ndarray, np.ndarray]:
        """One kernel call: each text's ids copied out (None where not encoded), the counts
        the kernel wrote, and the texts' code points (a view of the workspace's buffer)."""
        rule = self.classes.rule
        chars, text_ends = workspace.chars.fill(texts)
        out = workspace.ids.room(4 * len(chars))  # a character is at most 4 byte tokens
        counts = np.empty(len(texts), dtype=np.int64)
        _encode(chars, text_ends, self.classes.table, rule.numbers, rule.shape, self.tables, workspace.cache, out, counts)  # fmt: skip
        return _split_out(out, counts), counts, chars


def _split_out(out: np.ndarray, counts: np.ndarray) -> list[np.ndarray | None]:
    """Each text's ids copied out of the workspace's buffer; None where the text was not
    encoded."""
    written = np.where(counts >= 0, counts, 0)
    ends = np.concatenate(([0], np.cumsum(written))).tolist()
    ids = out[: ends[-1]].astype(np.int32)
    result: list[np.ndarray | None] = [ids[a:b] for a, b in pairwise(ends)]
    for i in np.flatnonzero(counts < 0).tolist():
        result[i] = None
    return result


def _merge_map(model: dict[str, Any], vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray, int]:
    """The merges as a compiled map: (left id << 32 | right id) -> (rank << 32 | merged id)."""
    merges = IntMap(*NativeBPE.merge_pairs(model, vocab))
    return merges.keys, merges.values, merges.shift


class _Workspace:
    """A word cache and the buffers a call writes, kept from call to call (as ``bpe_native``'s)."""

    def __init__(self) -> None:
        self.cache = new_word_cache(CACHE_BITS)
        self.chars = CodePointBuffer()
        self.ids = KeptArray(np.int64)

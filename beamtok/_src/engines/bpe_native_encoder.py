"""``NativeBPE``: the encoder over the compiled SentencePiece-style BPE kernels of
``bpe_native.py`` (the rules they follow are written there): a ``tokenizers`` BPE model's
tables built once, and texts encoded through a workspace one call at a time."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from beamtok._src.engines.bpe_native import encode_marked
from beamtok._src.engines.compiled_tables import CodePointBuffer, IntMap, KeptArray, Trie, Workspaces, byte_token_ids
from beamtok._src.engines.compiled_word_cache import new_word_cache
from beamtok._src.engines.word_cutters import CUT_BEFORE_EVERY_MARK, CUT_BEFORE_MARK_AFTER_OTHER, NO_CUT, Marking

__all__ = ["NativeBPE"]

CACHE_BITS = 19  # slots of the word cache; it holds at most half as many words


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
            encode_marked(chars, text_ends, self.cut, self.mark, self.tables, workspace.cache, out, counts)
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

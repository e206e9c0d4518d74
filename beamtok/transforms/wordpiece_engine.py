"""An exact fast path for WordPiece tokenizers (BERT's kind): words split as ``tokenizers``
splits them, each word's pieces computed once and cached.

Why a cache of words is exact: ``tokenizers`` encodes a text in three parts — the normalizer
maps the whole text, the pre-tokenizer cuts the normalized text into words, and the WordPiece
model turns each word into pieces (greedy longest match, ``##`` for continuations, the
unknown token for a word too long or with no match) looking at that word alone. The pieces
of a word therefore depend on the word and nothing else, and a cache from word to ids gives
what the model gives, provided the words are the ones ``tokenizers`` cuts. A cache miss asks
the file's own model (``model.tokenize``), so the pieces are never recomputed here.

How words are cut:

- An ASCII text under ``BertNormalizer(clean_text=True)``: the normalizer deletes NUL and the
  ASCII control characters other than tab, newline and carriage return, turns those three
  into spaces, and lowercases when ``lowercase`` is set; accent stripping and the spacing of
  Chinese characters do nothing to ASCII. That is one ``str.translate``.
- Any other text goes through the file's own normalizer (``normalize_str``, native code).
- ``BertPreTokenizer`` on an ASCII string cuts at whitespace (tab, newline, vertical tab, form
  feed, carriage return, space: Rust's ``char::is_whitespace`` on ASCII) and isolates every
  ASCII punctuation character (``!`` to ``/``, ``:`` to ``@``, ``[`` to `````, ``{`` to
  ``~``: ``is_ascii_punctuation``); a run of any other characters (letters, digits, the
  remaining controls) is a word. That is one regular expression. A normalized text that is
  not ASCII is cut by the file's own pre-tokenizer (``pre_tokenize_str``).

So only ASCII handling is reproduced, and it is small enough to state whole; everything else
is ``tokenizers``' own code. Texts holding an added token (``[CLS]`` written in the text) are
encoded by ``tokenizers`` itself, and the tokens a post-processor puts around a text are put
around the ids, as on the other fast paths. At load the encoder must still give
``tokenizers``' ids on the probe strings and a slice of the split sample, with and without
special tokens, or it is refused with the string that differs.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from beamtok.base.errors import ConfigError
from beamtok.transforms.exact_encoder import ExactEncoder, Needles, added_around, refuse_unrouted_added_tokens
from beamtok.transforms.id_arrays import int32_ids

__all__ = ["WordPieceEncoder"]

CACHED_WORDS = 1 << 20  # words kept before the cache starts over (a word's ids are a few ints)
# BertPreTokenizer on ASCII: a run of characters that are neither whitespace nor punctuation, or one punctuation character
ASCII_WORDS = re.compile(r"[^\t\n\x0b\x0c\r !-/:-@\[-`{-~]+|[!-/:-@\[-`{-~]")
CLEANED = {**{c: None for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)}, 0x09: " ", 0x0A: " ", 0x0D: " "}
LOWERED = {c: chr(c + 32) for c in range(ord("A"), ord("Z") + 1)}


class WordCache(dict[str, list[int]]):
    """Word -> ids, computed by the file's WordPiece model on a miss; starts over when full."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def __missing__(self, word: str) -> list[int]:
        if len(self) >= CACHED_WORDS:
            self.clear()
        ids = [token.id for token in self.model.tokenize(word)]
        self[word] = ids
        return ids


class WordPieceEncoder(ExactEncoder):
    """Encodes exactly like the given WordPiece tokenizer (see the module docstring)."""

    family = "WordPiece"

    def __init__(self, tokenizer_json: str, name: str, reference: Any = None) -> None:
        from beamtok.transforms.split_patterns import split_sample
        from beamtok.transforms.tiktoken_backend import PROBES

        spec = json.loads(tokenizer_json)
        self._check(spec, name)
        self.prefix, self.suffix = added_around(spec.get("post_processor") or {}, name)
        if reference is None:
            from tokenizers import Tokenizer as RustTokenizer

            reference = RustTokenizer.from_str(tokenizer_json)
        self.reference = reference
        self.engine_name = "beamtok WordPiece (words cached)"
        normalizer = spec.get("normalizer") or {}
        self._translate: dict[int, Any] | None = None
        if normalizer.get("type") == "BertNormalizer" and normalizer.get("clean_text", True):
            self._translate = {**CLEANED, **(LOWERED if normalizer.get("lowercase", True) else {})}
        self._normalizer = reference.normalizer
        self._pre_tokenizer = reference.pre_tokenizer
        self._words = WordCache(reference.model)
        self._routed = Needles([t["content"] for t in spec.get("added_tokens", [])])
        self.probe(name, [*PROBES, *split_sample()[::8]])

    def _check(self, spec: dict[str, Any], name: str) -> None:
        def refuse(why: str) -> ConfigError:
            return ConfigError(f"tokenizer {name!r} cannot use the exact fast path (WordPiece): {why}")

        model = spec.get("model") or {}
        if model.get("type") != "WordPiece":
            raise refuse(f"its model is {model.get('type')}, not WordPiece")
        pre = spec.get("pre_tokenizer") or {}
        if pre.get("type") != "BertPreTokenizer":
            raise refuse(f"its pre-tokenizer is {pre.get('type')}, not BertPreTokenizer (the split this path reproduces on ASCII)")
        refuse_unrouted_added_tokens(spec, refuse)

    def _word_list(self, text: str) -> list[str]:
        """The words ``tokenizers`` cuts ``text`` into (see the module docstring)."""
        if self._translate is not None and text.isascii():
            return ASCII_WORDS.findall(text.translate(self._translate))
        normalized = self._normalizer.normalize_str(text) if self._normalizer is not None else text
        if normalized.isascii():
            return ASCII_WORDS.findall(normalized)
        return [word for word, _ in self._pre_tokenizer.pre_tokenize_str(normalized)]

    def _encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        pieces = self._words.__getitem__
        chain = itertools.chain.from_iterable
        out = []
        for text in texts:
            if self._routed.found_in(text):
                out.append(int32_ids(self.reference.encode(text, add_special_tokens=False).ids))
            else:
                out.append(np.fromiter(chain(map(pieces, self._word_list(text))), dtype=np.int32))
        return out

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a WordPieceEncoder is rebuilt, not pickled (Tokenizer drops it when pickled)")

"""Every engine of the fast path against ``tokenizers`` across the whole of Unicode.

The engines read characters through Unicode tables of their own (Python's ``unicodedata`` and
``str`` methods, kitoken's, bpe-openai's and tiktoken's regex classes), each of some Unicode
version, and ``tokenizers`` through its own: a character one of them knows and the other does
not can be split, cased or normalized otherwise (as NFC was, ``normal_forms``). So each file's
fast path (o200k's split and DeepSeek-V3's three splits over cl100k's ranks on the compiled
byte-level engine, among the others) reads code points in three contexts (between letters and
digits, after a combining mark, beside an accented letter): every code point below U+3000, where most scripts and their
marks lie; one in eleven of the rest of planes 0-3 and of plane 14, a different eleventh for
each tokenizer; and one in a thousand and one of planes 4-13, where no Unicode version to date
assigns a character, and of planes 15-16, private use (each a class of its own that a sample
shows). And so for the engines taken where numba is not installed (kitoken, cached words,
tiktoken). A library upgrade that moves one table is found here. The special tokens around
the ids do not depend on the character: they are checked on every 97th text."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_sentencepiece_files import converted

from beamtok import load_tokenizer
from beamtok._src.engines.ranks import DEEPSEEK_V3_SPLITS, O200K_PATTERN
from beamtok._src.transforms import tokenizer_registry

from byte_level_files import built_from_ranks, split_as
from conftest import ROOT, TOKENIZER_DIR, assert_same_ids, modules_blocked, trained_family
from test_fast_path_cached_words import COMPILED

pytestmark = pytest.mark.slow

CONTEXTS = ("x{0}y {0}1 {0}{0}", "\u0301{0}a", "1{0} \u00e9{0}")
STRIDE = 11
THIN = 1001
SAMPLED = (  # (first, end, step)
    (0x3000, 0x40000, STRIDE),  # the rest of planes 0-3: CJK, Hangul, the historic scripts
    (0xE0000, 0xF0000, STRIDE),  # plane 14: tags and variation selectors
    (0x40000, 0xE0000, THIN),  # planes 4-13: unassigned in every Unicode version to date
    (0xF0000, 0x110000, THIN),  # planes 15-16: private use
)
KINDS = [
    "gpt2",
    "bert-base-uncased",
    "qwen2",
    "cl100k-converted",
    "llama3-form",
    "o200k-converted",
    "o200k-split",
    "deepseek-v3-split",
    "sp-bpe-metaspace",
    "sp-bpe-prepend",
    "unigram",
    "wordpiece",
    "t5",
    "llama2",
]


def directory(kind: str) -> str:
    if kind == "gpt2":
        return str(TOKENIZER_DIR)
    if kind == "bert-base-uncased":
        return str(ROOT / "data" / "tokenizers" / kind)
    if kind in ("t5", "llama2"):
        return str(converted(kind))
    if kind in ("sp-bpe-metaspace", "sp-bpe-prepend", "unigram", "wordpiece"):
        return str(trained_family(kind))
    if kind == "o200k-split":  # o200k's split on cl100k's ranks: the compiled engine's (bpe-openai takes o200k's own)
        return split_as("cl100k", (O200K_PATTERN,))
    if kind == "deepseek-v3-split":
        return split_as("cl100k", DEEPSEEK_V3_SPLITS)
    return built_from_ranks(kind)


def points(offset: int) -> list[int]:
    sampled = [c for first, end, step in SAMPLED for c in range(first + offset % step, end, step)]
    return [c for c in [*range(0x3000), *sampled] if not 0xD800 <= c < 0xE000]


@pytest.mark.parametrize("kind", KINDS)
def test_the_fast_path_reads_every_character_as_tokenizers_does(kind):
    tok = load_tokenizer(directory(kind))
    assert tok.engine_choice.encoder is not None, tok.engine
    texts = [context.format(chr(c)) for c in points(KINDS.index(kind)) for context in CONTEXTS]
    assert_same_ids(tok, texts, f"{kind} ({Path(directory(kind)).name})", special_every=97)


@pytest.mark.parametrize("kind", ["sp-bpe-metaspace", "unigram", "t5", "qwen2"])
def test_so_do_the_engines_taken_without_numba(kind, monkeypatch):
    """Qwen2's file stands for cl100k's spellings: tiktoken, where the compiled byte-level BPE
    runs with numba."""
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})  # a tokenizer loaded before keeps its compiled engine
    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})
    with modules_blocked(*COMPILED):
        tok = load_tokenizer(directory(kind))
        assert tok.engine_choice.encoder is not None and not tok.engine.startswith("beamtok compiled"), tok.engine
    texts = [context.format(chr(c)) for c in points(len(KINDS) + KINDS.index(kind)) for context in CONTEXTS]
    assert_same_ids(tok, texts, f"{kind} without numba ({tok.engine.split(' (')[0]})", special_every=97)

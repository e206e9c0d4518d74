"""The compiled Unigram (``engines/unigram_native``) gives the ids of the ``tokenizers``
Unigram model word for word: on random vocabularies whose scores tie often (a small set of
values), with unknown characters, a literal ``<unk>``, duplicate tokens, byte fallback with
every byte token or some, and no unknown id (where ``tokenizers`` raises, the word is given
to the model); on the words of a tokenizer trained on the shipped corpus; and, without numba,
the cached-words engine still gives the same ids. Adversarial text through the engine is in
``test_fast_path_cached_words``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as RustTokenizer
from tokenizers import models

from beamtok import load_tokenizer
from beamtok._src.engines.byte_level_file import PROBES
from beamtok._src.engines.cached_words import CachedWordsEncoder
from beamtok._src.engines.engine_choice import choose
from beamtok._src.engines.unigram_native import NativeUnigram

from byte_level_files import shipped_texts
from conftest import assert_same_ids, modules_blocked, trained_family, wrong_on_threads
from test_fast_path_cached_words import python_source

ALPHABET = "ab-é語😀"  # one to four UTF-8 bytes a character
UNKNOWN = "xZ\n"  # never in a vocabulary below


class Asked(Exception):
    """A word the compiled model gave back to the file's model."""


def ask(words):
    raise Asked(words)


def reference_ids(model: models.Unigram, word: str) -> list[int] | None:
    """``tokenizers``' ids of a word; None where it raises (an unknown character, no unk id)."""
    try:
        return [token.id for token in model.tokenize(word)]
    except Exception:
        return None


def native_ids(native: NativeUnigram, word: str) -> list[int] | None:
    try:
        return native.encode([[word]])[0].tolist()
    except Asked:
        return None


def serialized(vocab: list[tuple[str, float]], unk_id: int | None, byte_fallback: bool) -> tuple[models.Unigram, dict]:
    """The model ``tokenizers`` builds, and its serialized section (what the engine reads)."""
    model = models.Unigram(vocab, unk_id, byte_fallback)
    return model, json.loads(RustTokenizer(model).to_str())["model"]


BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]

vocabularies = st.builds(
    lambda pieces, scores, extra, bytes_kept: (pieces, scores, extra, bytes_kept),
    st.lists(st.text(ALPHABET, min_size=1, max_size=4), min_size=1, max_size=30),
    st.lists(st.sampled_from([-1.0, -2.0, -3.0, -1.5, -0.5, -4.0, -2.5]), min_size=30, max_size=30),
    st.sampled_from(["none", "unk first", "unk last", "no unk"]),
    st.sampled_from(["none", "all", "some"]),
)


@settings(max_examples=300, deadline=None)
@given(
    vocabulary=vocabularies,
    words=st.lists(st.text(ALPHABET + UNKNOWN + "<>unk", min_size=1, max_size=16), min_size=1, max_size=12),
    byte_fallback=st.booleans(),
)
def test_random_vocabularies_with_ties_give_the_ids_of_tokenizers(vocabulary, words, byte_fallback):
    pieces, scores, extra, bytes_kept = vocabulary
    vocab = [(piece, scores[i % len(scores)]) for i, piece in enumerate(pieces)]  # duplicates stay: the last entry wins
    unk_id: int | None = None
    if extra == "unk first":
        vocab, unk_id = [("<unk>", 0.0), *vocab], 0
    elif extra == "unk last":
        vocab, unk_id = [*vocab, ("<unk>", -2.0)], len(vocab)
    if bytes_kept != "none":
        vocab += [(token, -5.0) for token in (BYTE_TOKENS if bytes_kept == "all" else BYTE_TOKENS[::3])]
    model, spec = serialized(vocab, unk_id, byte_fallback)
    native = NativeUnigram(spec, ask)
    for word in words:
        assert native_ids(native, word) == reference_ids(model, word), (word, vocab, unk_id, byte_fallback)
    # the same words in one call: each text's ids from one array
    if all(reference_ids(model, word) is not None for word in words):
        got = native.encode([words[: len(words) // 2], words[len(words) // 2 :], []])
        assert [ids.tolist() for ids in got] == [
            [i for word in part for i in reference_ids(model, word)]
            for part in (words[: len(words) // 2], words[len(words) // 2 :], [])
        ]


MARK = "\u2581"
CUTS = {0: f"{MARK}[^{MARK}]*|[^{MARK}]+", 1: f"{MARK}*[^{MARK}]+|{MARK}+", 2: "(?s).+"}  # word_cutters' native cuts


@settings(max_examples=200, deadline=None)
@given(
    vocabulary=vocabularies,
    texts=st.lists(st.text(ALPHABET + UNKNOWN + MARK * 3, max_size=24), min_size=1, max_size=6),
    cut=st.sampled_from([0, 1, 2]),
)
def test_marked_texts_cut_in_compiled_code_give_the_ids_of_their_words(vocabulary, texts, cut):
    """``encode_marked`` cuts each text where the pre-tokenizer would (before every mark,
    before a mark after another character, or not at all) and gives the ids ``tokenizers``
    gives those words; a text with a word the model must be asked about comes back None."""
    import re

    pieces, scores, extra, bytes_kept = vocabulary
    vocab = [(piece, scores[i % len(scores)]) for i, piece in enumerate([*pieces, MARK, MARK + "a"])]
    unk_id = None if extra in ("none", "no unk") else 0
    if unk_id is not None:
        vocab = [("<unk>", 0.0), *vocab]
    if bytes_kept != "none":
        vocab += [(token, -5.0) for token in (BYTE_TOKENS if bytes_kept == "all" else BYTE_TOKENS[::3])]
    model, spec = serialized(vocab, unk_id, bytes_kept != "none")
    native = NativeUnigram(spec, ask)
    got = native.encode_marked(texts, cut, MARK)
    for text, ids in zip(texts, got):
        words = re.findall(CUTS[cut], text)
        want = [reference_ids(model, word) for word in words]
        if any(w is None for w in want):
            assert ids is None, text
        else:
            assert ids is not None and ids.tolist() == [i for w in want for i in w], (text, words)


def test_each_cut_gives_its_own_words():
    """``▁▁a`` is one word cut before a mark after another character, two cut before every
    mark, and the model segments them apart: ``▁▁`` + ``a`` against ``▁`` and ``▁a``."""
    model, spec = serialized(
        [("<unk>", 0.0), (MARK, -5.0), (MARK * 2, -1.0), ("a", -1.0), (MARK + "a", -3.0)], 0, False
    )
    native = NativeUnigram(spec, ask)
    ids = {
        piece: i
        for i, (piece, _) in enumerate(
            [("<unk>", 0.0), (MARK, -5.0), (MARK * 2, -1.0), ("a", -1.0), (MARK + "a", -3.0)]
        )
    }
    text = MARK * 2 + "a" + MARK + "a"
    assert native.encode_marked([text], 0, MARK)[0].tolist() == [ids[MARK], ids[MARK + "a"], ids[MARK + "a"]]
    assert native.encode_marked([text], 1, MARK)[0].tolist() == [ids[MARK * 2], ids["a"], ids[MARK + "a"]]
    assert native.encode_marked([text], 2, MARK)[0].tolist() == reference_ids(model, text)


def test_a_tie_is_won_by_the_earliest_start():
    """``---`` is ``-`` + ``--`` or ``--`` + ``-`` at equal score; ``tokenizers`` keeps the
    piece that starts first at the last boundary (``--`` from 1), sentencepiece and kitoken
    may not."""
    model, spec = serialized([("<unk>", 0.0), ("-", -3.0), ("--", -4.0)], 0, False)
    assert reference_ids(model, "---") == [1, 2]
    assert native_ids(NativeUnigram(spec, ask), "---") == [1, 2]
    assert native_ids(NativeUnigram(spec, ask), "-----") == reference_ids(model, "-----")


def test_unknown_characters_are_fused_then_spelled_in_bytes():
    model, spec = serialized([("<unk>", 0.0), ("a", -1.0), *[(t, -5.0) for t in BYTE_TOKENS]], 0, True)
    native = NativeUnigram(spec, ask)
    for word in ("aé語a", "é", "😀😀a", "a<unk>a", "<unk>é"):
        assert native_ids(native, word) == reference_ids(model, word), word
    assert native_ids(native, "é") == [1 + 1 + 0xC3, 1 + 1 + 0xA9]


def test_ids_a_call_returned_stay_as_they_were_after_later_calls():
    """The arrays a call segments into are kept for the next call: what it returned is copied
    out of them."""
    model, spec = serialized(
        [("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("ab", -1.5), *[(t, -5.0) for t in BYTE_TOKENS]], 0, True
    )
    native = NativeUnigram(spec, ask)
    words = ["ab", "ba", "aé語b", "bb"] * 20
    first = native.encode([words])
    assert first[0].tolist() == [i for word in words for i in reference_ids(model, word)]
    kept = first[0].tolist()
    native.encode([["b", "a"], ["😀"]])  # shorter: the kept arrays are not regrown
    assert first[0].tolist() == kept


def test_threads_segmenting_at_once_each_get_their_own_ids():
    """The kernel runs without the GIL and writes into the kept arrays: threads using one
    engine at once each get a workspace no other is writing."""
    import random

    model, spec = serialized(
        [("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("ab", -1.5), ("é語", -2.0), *[(t, -5.0) for t in BYTE_TOKENS]],
        0,
        True,
    )
    native = NativeUnigram(spec, ask)

    def texts(seed: int) -> list[list[str]]:
        rng = random.Random(seed)
        return [
            ["".join(rng.choice("abé語😀-") for _ in range(rng.randint(1, 9))) for _ in range(300)] for _ in range(10)
        ]

    batches = [texts(seed) for seed in range(6)]
    want = [[[i for word in text for i in reference_ids(model, word)] for text in batch] for batch in batches]
    assert wrong_on_threads(native.encode, batches, want) == []


@pytest.fixture(scope="module")
def unigram():
    return trained_family("unigram")


def test_every_word_of_the_corpus_and_code_gives_the_models_ids(unigram):
    tok = RustTokenizer.from_file(str(unigram / "tokenizer.json"))
    native = NativeUnigram(json.loads(tok.to_str())["model"], ask)
    words = sorted(
        {
            w
            for text in [*shipped_texts(), *python_source(60), *PROBES]
            for w, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text))
        }
    )
    assert len(words) > 50_000
    got = native.encode([[w] for w in words])
    differ = [w for w, ids in zip(words, got) if ids.tolist() != [t.id for t in tok.model.tokenize(w)]]
    assert not differ, f"{len(differ)} words differ, first {differ[0]!r}"


def test_the_engine_segments_in_compiled_code_and_keeps_no_cache(unigram):
    tok = load_tokenizer(str(unigram))
    encoder = tok.engine_choice.encoder
    assert tok.engine.startswith("beamtok compiled Unigram on cut words (exact fast path"), tok.engine
    assert isinstance(encoder.engine._words, NativeUnigram)


def test_without_numba_the_words_are_cached_with_the_same_ids(unigram):
    """As where numba is not installed: the engine caches words the file's model computes,
    and says what the ``unigram`` extra would give."""
    tok = load_tokenizer(str(unigram))
    with modules_blocked("beamtok._src.engines.unigram_native"):
        choice = choose(tok.backend, "no numba", tok.backend.to_str())
    encoder = choice.encoder
    assert isinstance(encoder.engine, CachedWordsEncoder) and encoder.engine_name == "beamtok cached words", choice
    assert [r.candidate for r in choice.refused] == ["compiled Unigram"]
    assert "pip install 'beamtok[compiled]'" in choice.refused[0].reason
    assert choice.refused[0].missing_package  # the install lacks numba: not held against the file

    class WithoutNumba:
        backend = tok.backend

        def encode_batch(self, texts, add_special_tokens=True, engine="auto"):
            return encoder.encode_batch(texts, add_special_tokens)

    assert_same_ids(WithoutNumba(), [*shipped_texts()[::3], *python_source(30), *PROBES], "no numba")


def test_where_numba_can_cache_nothing_it_compiles_in_each_process(tmp_path):
    """A read-only install with no writable home: numba refuses ``cache=True`` there; the
    compiled tables are then compiled without a cache instead of failing to import."""
    module = tmp_path / "compiled_tables.py"
    module.write_text(
        (Path(__file__).parents[2] / "beamtok" / "_src" / "engines" / "compiled_tables.py").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    (tmp_path / "__pycache__").write_text("a file where numba would put its cache")
    program = (
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('copied', {str(module)!r})\n"
        "copied = importlib.util.module_from_spec(spec); spec.loader.exec_module(copied)\n"
        "trie = copied.Trie(['-', '--', 'ab'])\n"
        "node = copied.child(trie.keys, trie.children, trie.shift, 0, ord('-'))\n"
        "print(trie.token_at[copied.child(trie.keys, trie.children, trie.shift, node, ord('-'))])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(HOME="/proc/nonexistent", XDG_CACHE_HOME="/proc/nonexistent")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "1"

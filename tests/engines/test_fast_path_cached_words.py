"""The cached-words fast path (WordPiece, Unigram, SentencePiece-style BPE): words cut as
``tokenizers`` cuts them and cached give the ids of ``tokenizers`` on the shipped corpus,
Python source, the probe strings and adversarial text, with and without special tokens, for
every normalizer setting and pre-tokenizer form it takes; what it cannot follow is refused
by name. The tokenizers are trained here with ``tokenizers`` on the shipped corpus."""

from __future__ import annotations

import importlib
import json
import pickle
import sys
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from beamtok import ConfigError, Dataset, load_tokenizer
from beamtok._src.engines import cached_words
from beamtok._src.engines.byte_level_file import PROBES
from beamtok._src.engines.cached_words import CachedWordsEncoder, CompiledBPEEncoder, CompiledUnigramEncoder
from beamtok._src.engines.exact_encoder import ExactEncoder
from beamtok.testing import assert_items_equal

from byte_level_files import ADVERSARIAL, shipped_texts
from conftest import CORPUS, assert_same_ids, modules_blocked, on_threads, trained_family

NORMALIZERS = {
    "uncased": {
        "type": "BertNormalizer",
        "clean_text": True,
        "handle_chinese_chars": True,
        "strip_accents": None,
        "lowercase": True,
    },
    "cased": {
        "type": "BertNormalizer",
        "clean_text": True,
        "handle_chinese_chars": True,
        "strip_accents": None,
        "lowercase": False,
    },
    "no clean_text": {
        "type": "BertNormalizer",
        "clean_text": False,
        "handle_chinese_chars": False,
        "strip_accents": True,
        "lowercase": True,
    },
    "a sequence": {
        "type": "Sequence",
        "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}],
    },
}


CACHED = ["wordpiece", "unigram", "sp-bpe-metaspace"]


@pytest.fixture(scope="module")
def trained() -> dict[str, Path]:
    return {kind: trained_family(kind) for kind in CACHED}


@pytest.fixture(scope="module")
def wordpiece(trained) -> Path:
    return trained["wordpiece"]


# texts whose lines are ASCII but for one: BERT's words are cut line by line there
MIXED_LINES = [
    "First line, ASCII.\nZweite Zeile mit Ümlaut und ß\n\tThird: ASCII again!\r\nΣΊΣΥΦΟΣ ΟΔΥΣΣΕΥΣ\nlast",
    "e\u0301\ncombining mark after a newline\n\u0301 and before one\u0301\n中文 mixed with ASCII\n\n",
]


def variant(base: Path, tmp_path: Path, **parts) -> str:
    spec = json.loads((base / "tokenizer.json").read_text(encoding="utf-8"))
    spec.update(parts)
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text((base / "tokenizer_config.json").read_text(encoding="utf-8"))
    return str(tmp_path)


def python_source(limit: int = 150) -> list[str]:
    """Real source code: the standard library's modules, in name order."""
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:limit]
    return [f.read_text(encoding="utf-8", errors="replace") for f in files]


# the modules that need numba, blocked to run as an install without it
COMPILED = (
    "beamtok._src.engines.bpe_native",
    "beamtok._src.engines.bpe_native_encoder",
    "beamtok._src.engines.unigram_native",
    "beamtok._src.engines.byte_level_native",
    "beamtok._src.engines.byte_level_split",
)


class CachedWords:
    """The cut-words engine of a tokenizer, whichever engine the tokenizer would choose,
    beside the tokenizer itself: compiled where numba is installed (``compiled``), else
    caching words (``compiled=False`` builds it as where numba is not installed)."""

    def __init__(self, path: str | Path, family: str, compiled: bool = True) -> None:
        self.tok = load_tokenizer(str(path))
        self.backend = self.tok.backend
        engine = CachedWordsEncoder
        if compiled and family != "WordPiece":
            engine = CompiledUnigramEncoder if family == "Unigram" else CompiledBPEEncoder
        with modules_blocked(*(() if compiled else COMPILED)):
            self.engine = ExactEncoder(engine(self.tok.backend.to_str(), str(path), family, reference=self.tok.backend))
        assert self.engine.engine_name.startswith(
            "beamtok compiled" if compiled and family != "WordPiece" else "beamtok cached words"
        ), self.engine.engine_name

    def encode_batch(self, texts, add_special_tokens=True, engine="auto"):
        if engine == "tokenizers":
            return self.tok.encode_batch(texts, add_special_tokens, engine="tokenizers")
        return self.engine.encode_batch(texts, add_special_tokens)


def test_modules_blocked_for_a_build_come_back_and_what_it_imported_stays(tmp_path, monkeypatch):
    """Building an engine as where numba is missing may import modules for the first time
    (numba's registries, numpy.fft on a first compile): they stay imported after the block,
    and the blocked modules are as they were (imported again, they would fail)."""
    (tmp_path / "first_imported_in_the_block.py").write_text("VALUE = 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    kept = {name: sys.modules.get(name) for name in COMPILED}
    with modules_blocked(*COMPILED):
        with pytest.raises(ImportError):
            importlib.import_module(COMPILED[0])
        importlib.import_module("first_imported_in_the_block")
    assert "first_imported_in_the_block" in sys.modules
    assert {name: sys.modules.get(name) for name in COMPILED} == kept
    del sys.modules["first_imported_in_the_block"]


FAMILY = {"wordpiece": "WordPiece", "unigram": "Unigram", "sp-bpe-metaspace": "SentencePiece-style BPE"}


DEFAULT_ENGINE = {
    "unigram": "beamtok compiled Unigram on cut words (",
    "sp-bpe-metaspace": "beamtok compiled BPE on marked words (",
    "wordpiece": "kitoken (",
}


# each family's cut-words engines, compiled (numba) and caching words, checked against one
# reference encoding of the texts; WordPiece has no compiled model here (kitoken is native:
# tests/engines/test_fast_path_families.py)
ENGINE_KINDS = {"unigram": (True, False), "sp-bpe-metaspace": (True, False), "wordpiece": (False,)}


@pytest.mark.parametrize("kind", list(ENGINE_KINDS))
def test_cached_words_give_the_ids_of_tokenizers_on_the_shipped_corpus_and_code(trained, kind):
    loaded = load_tokenizer(str(trained[kind]))
    assert loaded.engine.startswith(DEFAULT_ENGINE[kind]), loaded.engine
    texts = [
        *shipped_texts(),
        *python_source(),
        *PROBES,
        *MIXED_LINES,
        "",
        "[CLS] inside [SEP] text",
        "<s> and </s> inside",
        "snake_case_name __dunder__",
        "\U00018cd6",
        "x" * 300,
    ]
    plain = loaded.backend.encode_batch_fast(texts, add_special_tokens=False)
    for compiled in ENGINE_KINDS[kind]:
        tok = CachedWords(trained[kind], FAMILY[kind], compiled)
        assert_same_ids(tok, texts, f"{kind} ({'compiled' if compiled else 'Python'})", special_every=97, encoded=plain)


@pytest.mark.parametrize("kind", CACHED)
def test_a_text_holding_any_added_token_goes_to_the_file_itself(trained, kind):
    """Every added token of the file, inside a text, alone, and twice: such texts go to
    ``tokenizers`` whole (the engines know no added tokens), whichever engine the file takes."""
    added = [
        t["content"]
        for t in json.loads(Path(trained[kind], "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    ]
    assert len(added) >= 2, added
    texts = [text for token in added for text in (f"a {token} b", token, f"{token}{token}x")]
    assert_same_ids(CachedWords(trained[kind], FAMILY[kind]), texts, kind)
    assert_same_ids(load_tokenizer(str(trained[kind])), texts, kind)


@pytest.mark.parametrize("name", [n for n in NORMALIZERS if n != "uncased"])
def test_every_bert_normalizer_setting_gives_the_ids_of_tokenizers(wordpiece, tmp_path, name):
    """On cached words, and on kitoken where the file is BERT's kind (the tokenizer's own choice)."""
    path = variant(wordpiece, tmp_path, normalizer=NORMALIZERS[name])
    tok = load_tokenizer(path)
    bert = NORMALIZERS[name]["type"] == "BertNormalizer"
    assert tok.engine.startswith("kitoken (exact fast path" if bert else "beamtok cached words"), tok.engine
    texts = [
        *shipped_texts()[::4],
        *python_source(40),
        *PROBES,
        *MIXED_LINES,
        "Ünïcödé ÀÉÎ and\x0bvertical\x0cfeed\x1c\x1dgroup",
        "\u0378 unassigned",
    ]
    for encoder in (tok, CachedWords(path, "WordPiece")) if bert else (tok,):
        assert_same_ids(encoder, texts, name)


METASPACE = {
    "prepend first": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
    "never prepend": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": True},
    "legacy add_prefix_space": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
}


@pytest.mark.parametrize("name", list(METASPACE))
@pytest.mark.parametrize("kind", ["unigram", "sp-bpe-metaspace"])
def test_every_metaspace_form_gives_the_ids_of_tokenizers(trained, tmp_path, kind, name):
    extra = (
        {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}}
        if kind == "sp-bpe-metaspace"
        else {}
    )
    tok = load_tokenizer(variant(trained[kind], tmp_path, pre_tokenizer=METASPACE[name], **extra))
    assert tok.engine.startswith(DEFAULT_ENGINE[kind]), tok.engine
    assert_same_ids(
        tok,
        [*shipped_texts()[::6], *python_source(30), *PROBES, "  two  spaces  ", " lead", "trail "],
        f"{kind}, {name}",
    )


ENGINES: dict[tuple[str, bool], CachedWords] = {}


@pytest.mark.parametrize(("kind", "compiled"), [(k, c) for k, engines in ENGINE_KINDS.items() for c in engines])
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(text=ADVERSARIAL)
def test_adversarial_text_gives_the_ids_of_tokenizers(trained, kind, compiled, text):
    if (kind, compiled) not in ENGINES:  # built once: its probes take a while
        ENGINES[kind, compiled] = CachedWords(trained[kind], FAMILY[kind], compiled)
    tok = ENGINES[kind, compiled]
    for special in (True, False):
        assert (
            tok.encode_batch([text], special, engine="exact")[0].tolist()
            == tok.encode_batch([text], special, engine="tokenizers")[0].tolist()
        )


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "words cached"])
def test_a_text_marked_by_normalizers_is_cut_before_its_spaces_where_no_piece_spans_one(trained, tmp_path, compiled):
    """A Metaspace-trained BPE (no piece holds a character followed by a space mark) read
    with Prepend + Replace normalizers and no pre-tokenizer: ``tokenizers`` merges the whole
    text as one word, the engine cuts it; the ids agree (the argument in word_cutters)."""
    marks = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        ],
    }
    model = json.loads((trained["sp-bpe-metaspace"] / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    runs = ["\u2581" * n for n in (2, 3, 4)]  # as Llama-2's vocabulary holds them: space runs merge (indentation)
    vocab = {**model["vocab"], **{run: len(model["vocab"]) + i for i, run in enumerate(runs)}}
    merges = [[run[:-1], "\u2581"] for run in runs] + model["merges"]
    tok = CachedWords(
        variant(
            trained["sp-bpe-metaspace"],
            tmp_path,
            normalizer=marks,
            pre_tokenizer=None,
            model={**model, "vocab": vocab, "merges": merges},
        ),
        "SentencePiece-style BPE",
        compiled,
    )
    assert (
        vocab["\u2581" * 2] in tok.encode_batch(["a    b"], add_special_tokens=False, engine="tokenizers")[0].tolist()
    )  # the runs are used
    assert_same_ids(
        tok,
        [*shipped_texts()[::5], *python_source(30), *PROBES, "  two  spaces  ", "\u2581already marked"],
        "Prepend + Replace",
    )


def test_a_cache_that_starts_over_keeps_the_ids(wordpiece, monkeypatch):
    monkeypatch.setattr(cached_words, "CACHED_WORDS", 50)
    tok = load_tokenizer(str(wordpiece))
    encoder = CachedWords(wordpiece, "WordPiece").engine  # a new engine: its cache starts empty
    texts = shipped_texts()[:200]
    for start in range(0, len(texts), 4):  # batches of 4 texts: the cache starts over many times
        batch = texts[start : start + 4]
        assert [a.tolist() for a in encoder.encode_batch(batch)] == [
            e.ids for e in tok.backend.encode_batch_fast(batch)
        ]
        assert len(encoder.engine._words.ids) <= 50 + len({w for t in batch for w in encoder.engine._cutter.words(t)})


def test_threads_encoding_at_once_through_a_cache_that_starts_over_get_their_ids(wordpiece, monkeypatch):
    """One thread's start-over must not empty the cache between another's learning of its
    words and its reading of them (a KeyError before, or ids of another word)."""
    monkeypatch.setattr(cached_words, "CACHED_WORDS", 50)
    tok = load_tokenizer(str(wordpiece))
    encoder = CachedWords(wordpiece, "WordPiece").engine
    texts = shipped_texts()[:120]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts)]
    failures: list[str] = []

    def encode_often(k: int) -> None:
        try:
            for _ in range(5):
                for start in range(4 * k, len(texts), 24):
                    if [a.tolist() for a in encoder.encode_batch(texts[start : start + 4])] != want[start : start + 4]:
                        failures.append(f"texts {start}-{start + 3}: other ids")
                        return
        except Exception as e:  # what a thread raised is the failure reported
            failures.append(repr(e))

    on_threads(encode_often, 6)
    assert failures == []


def test_streams_iterated_on_threads_at_once_give_what_one_gives(trained, monkeypatch):
    """Two streams through one tokenizer on two threads (its compiled BPE encoder is shared,
    as by Beam's threaded workers) give the examples one stream gives alone."""
    from beamtok._src.engines import bpe_native_encoder
    from beamtok._src.transforms import tokenizer_registry

    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})  # an encoder of its own, with a small cache
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    monkeypatch.setattr(bpe_native_encoder, "CACHE_BITS", 9)
    path = str(trained["sp-bpe-metaspace"])
    assert load_tokenizer(path).engine.startswith("beamtok compiled BPE")

    def stream() -> Dataset:
        return Dataset.from_files(sorted(str(p) for p in CORPUS.glob("*.jsonl"))).tokenize(path).concat_chunk(64)

    alone = [ex["input_ids"].tolist() for ex in stream()]
    results: list[list[list[int]]] = [[], []]

    def run(k: int) -> None:
        results[k] = [ex["input_ids"].tolist() for ex in stream()]

    on_threads(run, 2)
    assert results[0] == alone and results[1] == alone


def test_a_cache_built_by_beams_threads_holds_what_the_stream_gives(trained, monkeypatch, tmp_path):
    """Beam's ``multi_threading`` workers run bundles on threads of one process, through its
    one tokenizer and compiled encoder: the cache they build holds the stream's examples."""
    pytest.importorskip("apache_beam")
    from beamtok._src.engines import bpe_native_encoder
    from beamtok._src.transforms import tokenizer_registry

    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})  # an encoder of its own, with a small cache
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    monkeypatch.setattr(bpe_native_encoder, "CACHE_BITS", 9)
    path = str(trained["sp-bpe-metaspace"])
    ds = Dataset.from_files(sorted(str(p) for p in CORPUS.glob("*.jsonl"))).tokenize(path).concat_chunk(64)
    want = list(ds)  # before the build: what the threads write into the cache cannot reach it
    cached = ds.cache(
        str(tmp_path / "threads"), direct_running_mode="multi_threading", direct_num_workers=4, progress=False
    )
    assert_items_equal(list(cached), want)


def test_what_it_cannot_follow_is_refused_by_name(trained):
    spec = json.loads((trained["wordpiece"] / "tokenizer.json").read_text(encoding="utf-8"))
    with pytest.raises(ConfigError, match="its pre-tokenizer is Whitespace, not BertPreTokenizer"):
        CachedWordsEncoder(json.dumps({**spec, "pre_tokenizer": {"type": "Whitespace"}}), "edited", "WordPiece")
    added = [{**t, "lstrip": True} if t["content"] == "[MASK]" else t for t in spec["added_tokens"]]
    with pytest.raises(ConfigError, match=r"added token '\[MASK\]' has matching options"):
        CachedWordsEncoder(json.dumps({**spec, "added_tokens": added}), "edited", "WordPiece")
    unigram = json.loads((trained["unigram"] / "tokenizer.json").read_text(encoding="utf-8"))
    bpe = json.loads((trained["sp-bpe-metaspace"] / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = bpe["model"]["vocab"]
    spanning = {
        **bpe,
        "pre_tokenizer": {**bpe["pre_tokenizer"], "split": False},
        "model": {**bpe["model"], "vocab": {**vocab, "e\u2581t": len(vocab)}},
    }
    with pytest.raises(
        ConfigError,
        match="does not split \\(the whole text is one word\\), and its vocabulary holds 'e\u2581t', a piece across a space",
    ):
        CachedWordsEncoder(json.dumps(spanning), "edited", "SentencePiece-style BPE")
    with pytest.raises(ConfigError, match="its pre-tokenizer is Whitespace, which this path does not reproduce"):
        CachedWordsEncoder(json.dumps({**unigram, "pre_tokenizer": {"type": "Whitespace"}}), "edited", "Unigram")


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "words cached"])
def test_a_metaspace_that_does_not_split_is_cut_where_no_piece_spans_a_space(trained, tmp_path, compiled):
    """Llama-2's form as ``transformers`` writes it: to ``tokenizers`` the marked text is one
    word; a BPE's text cut before each mark that follows another character gives the same ids."""
    spec = json.loads((trained["sp-bpe-metaspace"] / "tokenizer.json").read_text(encoding="utf-8"))
    tok = CachedWords(
        variant(trained["sp-bpe-metaspace"], tmp_path, pre_tokenizer={**spec["pre_tokenizer"], "split": False}),
        FAMILY["sp-bpe-metaspace"],
        compiled,
    )
    assert_same_ids(
        tok,
        [
            *shipped_texts()[::7],
            *python_source(20),
            *PROBES,
            "  two  spaces  ",
            " lead",
            "trail ",
            "\u2581\u2581marked",
        ],
        "Metaspace, split false",
    )


def test_a_unigram_text_is_never_cut_where_the_model_sees_it_whole(trained):
    """Cut before its marks, a Unigram text whose model sees it whole gives other ids: runs
    of ``-`` tie, and the float sums of the text before them break the tie otherwise. Which
    lines show it depends on the trained scores; some line of the shipped corpus does."""
    import re

    from tokenizers import Tokenizer as RustTokenizer

    spec = json.loads((trained["unigram"] / "tokenizer.json").read_text(encoding="utf-8"))
    one_word = {**spec, "pre_tokenizer": {**spec["pre_tokenizer"], "split": False}}
    whole = RustTokenizer.from_str(json.dumps(one_word))
    cut = re.compile("\u2581*[^\u2581]+|\u2581+").findall

    def cut_apart(line: str) -> list[int]:
        marked = whole.normalizer.normalize_str(line).replace(" ", "\u2581")
        marked = marked if marked.startswith("\u2581") else "\u2581" + marked  # Metaspace's prepend_scheme
        return [t.id for word in cut(marked) for t in whole.model.tokenize(word)]

    lines = (line for text in shipped_texts() for line in text.split("\n") if "--" in line and " " in line.strip())
    assert any(
        whole.encode(line, add_special_tokens=False).ids != cut_apart(line) for line in lines
    )  # why the cut is refused
    for pre in ({**spec["pre_tokenizer"], "split": False}, None):
        with pytest.raises(ConfigError, match="its Unigram model segments the whole text at once"):
            CachedWordsEncoder(json.dumps({**spec, "pre_tokenizer": pre}), "edited", "Unigram")


def test_the_pipeline_streams_the_same_and_a_pickled_tokenizer_rebuilds_its_engine(wordpiece):
    files = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]
    fast = list(Dataset.from_files(files).tokenize(str(wordpiece)).ensure_bos_eos().concat_chunk(256))
    slow = list(
        Dataset.from_files(files).tokenize(str(wordpiece), engine="tokenizers").ensure_bos_eos().concat_chunk(256)
    )
    assert_items_equal(fast, slow)
    tok = load_tokenizer(str(wordpiece))
    copy = pickle.loads(pickle.dumps(tok))
    assert [a.tolist() for a in copy.encode_batch(["Hello, World!"])] == [
        a.tolist() for a in tok.encode_batch(["Hello, World!"])
    ]
    assert copy.engine == tok.engine

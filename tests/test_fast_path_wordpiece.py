"""The exact fast path for WordPiece (BERT's kind): words cut as ``tokenizers`` cuts them and
cached give the ids of ``tokenizers`` on the shipped corpus, Python source, the probe strings
and adversarial text, with and without special tokens, for the normalizer's every setting;
what it cannot follow is refused by name. The tokenizer is trained here with ``tokenizers``
on the shipped corpus."""

from __future__ import annotations

import json
import pickle
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from beamtok import ConfigError, Dataset, load_tokenizer
from beamtok.testing import assert_items_equal, family_tokenizer
from beamtok.transforms import wordpiece_engine
from beamtok.transforms.tiktoken_backend import PROBES
from beamtok.transforms.wordpiece_engine import WordPieceEncoder

from conftest import CORPUS
from test_fast_path_byte_level import ADVERSARIAL, shipped_texts

NORMALIZERS = {
    "uncased": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
    "cased": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": False},
    "no clean_text": {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": False, "strip_accents": True, "lowercase": True},
    "a sequence": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}]},
}


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory) -> Path:
    texts = [json.loads(line)["text"] for path in sorted(CORPUS.glob("*.jsonl")) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return Path(family_tokenizer("wordpiece", texts, tmp_path_factory.mktemp("wordpiece"), vocab_size=6000))


def variant(wordpiece: Path, tmp_path: Path, normalizer: dict) -> str:
    spec = json.loads((wordpiece / "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"] = normalizer
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text((wordpiece / "tokenizer_config.json").read_text(encoding="utf-8"))
    return str(tmp_path)


def python_source(limit: int = 150) -> list[str]:
    """Real source code: the standard library's modules, in name order."""
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:limit]
    return [f.read_text(encoding="utf-8", errors="replace") for f in files]


def assert_same_ids(tok, texts: list[str], where: str) -> None:
    for special in (True, False):
        fast = tok.encode_batch(texts, add_special_tokens=special, backend="tiktoken")
        want = tok.encode_batch(texts, add_special_tokens=special, backend="hf")
        mismatched = [i for i, (a, b) in enumerate(zip(fast, want)) if a.tolist() != b.tolist()]
        assert not mismatched, f"{where} (add_special_tokens={special}): {len(mismatched)} differ, first {texts[mismatched[0]][:80]!r}"


def test_the_wordpiece_engine_gives_the_ids_of_tokenizers_on_the_shipped_corpus_and_code(wordpiece):
    tok = load_tokenizer(str(wordpiece))
    assert tok.engine.startswith("beamtok WordPiece (words cached) (exact fast path"), tok.engine
    texts = [*shipped_texts(), *python_source(), *PROBES, "", "[CLS] inside [SEP] text", "snake_case_name __dunder__", "\U00018cd6", "x" * 300]
    assert_same_ids(tok, texts, "uncased")


@pytest.mark.parametrize("name", [n for n in NORMALIZERS if n != "uncased"])
def test_every_normalizer_setting_gives_the_ids_of_tokenizers(wordpiece, tmp_path, name):
    tok = load_tokenizer(variant(wordpiece, tmp_path, NORMALIZERS[name]))
    assert tok.engine.startswith("beamtok WordPiece"), tok.engine
    assert_same_ids(tok, [*shipped_texts()[::4], *python_source(40), *PROBES, "Ünïcödé ÀÉÎ and\x0bvertical\x0cfeed\x1c\x1dgroup"], name)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=ADVERSARIAL)
def test_adversarial_text_gives_the_ids_of_tokenizers(wordpiece, text):
    tok = load_tokenizer(str(wordpiece))
    for special in (True, False):
        assert tok.encode_batch([text], special, backend="tiktoken")[0].tolist() == tok.encode_batch([text], special, backend="hf")[0].tolist()


def test_a_cache_that_starts_over_keeps_the_ids(wordpiece, monkeypatch):
    monkeypatch.setattr(wordpiece_engine, "CACHED_WORDS", 50)
    tok = load_tokenizer(str(wordpiece))
    tok.tiktoken()._words.clear()  # the tokenizer is loaded once a process: start from an empty cache
    texts = shipped_texts()[:200]
    assert_same_ids(tok, texts, "a cache of 50 words")
    assert len(tok.tiktoken()._words) <= 50


def test_what_it_cannot_follow_is_refused_by_name(wordpiece):
    spec = json.loads((wordpiece / "tokenizer.json").read_text(encoding="utf-8"))
    with pytest.raises(ConfigError, match="its pre-tokenizer is Whitespace, not BertPreTokenizer"):
        WordPieceEncoder(json.dumps({**spec, "pre_tokenizer": {"type": "Whitespace"}}), "edited")
    added = [{**t, "lstrip": True} if t["content"] == "[MASK]" else t for t in spec["added_tokens"]]
    with pytest.raises(ConfigError, match=r"added token '\[MASK\]' has matching options"):
        WordPieceEncoder(json.dumps({**spec, "added_tokens": added}), "edited")


def test_the_pipeline_streams_the_same_and_a_pickled_tokenizer_rebuilds_its_engine(wordpiece):
    files = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]
    fast = list(Dataset.from_files(files).tokenize(str(wordpiece)).ensure_bos_eos().concat_chunk(256))
    slow = list(Dataset.from_files(files).tokenize(str(wordpiece), backend="hf").ensure_bos_eos().concat_chunk(256))
    assert_items_equal(fast, slow)
    tok = load_tokenizer(str(wordpiece))
    copy = pickle.loads(pickle.dumps(tok))
    assert [a.tolist() for a in copy.encode_batch(["Hello, World!"])] == [a.tolist() for a in tok.encode_batch(["Hello, World!"])]
    assert copy.engine == tok.engine

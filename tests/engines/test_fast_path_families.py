"""kitoken's part of the fast path for tokenizers that are not byte-level BPE: SentencePiece-style
BPE and BERT-style WordPiece run on kitoken with the ids of ``tokenizers`` (texts holding a
character kitoken reads otherwise go to ``tokenizers``); a file kitoken refuses runs on cached words
and says why; one both refuse names both reasons. SentencePiece-style BPE takes kitoken where
numba is not installed (or its words cannot be cut), as every test here arranges; compiled,
it is tested in tests/engines/test_bpe_native.py and tests/engines/test_fast_path_cached_words.py. The
tokenizers are trained here with ``tokenizers`` on the shipped corpus."""

from __future__ import annotations

import json
import pickle
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from beamtok import ConfigError, Dataset, load_tokenizer
from beamtok._src.engines import wordpiece_chars
from beamtok._src.engines.byte_level_file import PROBES
from beamtok._src.engines.kitoken_families import ASCII_PROBES, KitokenEncoder
from beamtok._src.engines.normal_forms import differing_points
from beamtok._src.transforms import tokenizer_registry
from beamtok.testing import assert_items_equal

from byte_level_files import ADVERSARIAL, shipped_texts
from conftest import CORPUS, ROOT, assert_same_ids, trained_family
from test_fast_path_cached_words import MIXED_LINES, python_source

pytest.importorskip("kitoken")
VOCAB = 6000


# BERT's own uncased vocabulary in the tokenizer.json transformers writes for it (data/README.md)
BERT = ROOT / "data" / "tokenizers" / "bert-base-uncased"


@pytest.fixture(autouse=True)
def without_compiled_bpe(monkeypatch):
    """As where numba is not installed: SentencePiece-style BPE then takes kitoken (and
    the tokenizers this process loaded before, with their engines, are not reused)."""
    monkeypatch.setitem(sys.modules, "beamtok._src.engines.bpe_native", None)
    monkeypatch.setitem(sys.modules, "beamtok._src.engines.bpe_native_encoder", None)
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})


@pytest.fixture(scope="module")
def families() -> dict[str, str]:
    return {**{kind: str(trained_family(kind, VOCAB)) for kind in KITOKEN}, "bert-base-uncased": str(BERT)}


KITOKEN = ["sp-bpe-metaspace", "sp-bpe-prepend", "wordpiece"]


@pytest.mark.parametrize("kind", KITOKEN)
def test_kitoken_gives_the_ids_of_tokenizers_on_the_whole_shipped_corpus(families, kind):
    tok = load_tokenizer(families[kind])
    assert tok.engine.startswith("kitoken (exact fast path"), tok.engine
    assert tok.exact_encoder().engine.cuts_words == (
        kind == "sp-bpe-prepend"
    )  # words cut at "▁", not the whole text one word
    texts = [*shipped_texts(), *PROBES, "", "[CLS] inside [SEP] text", "<s> and </s> inside"]
    assert_same_ids(tok, texts, kind, special_every=97)


def test_bert_base_uncased_as_downloaded_runs_on_kitoken_with_the_ids_of_tokenizers():
    """A real BERT: kitoken with the ids of ``tokenizers`` on the shipped corpus, Python source,
    the probe strings, every ASCII character, lines mixing accents and CJK with ASCII, and
    ``[CLS]`` written in a text; ``[CLS] ... [SEP]`` around each text when asked."""
    tok = load_tokenizer(str(BERT))
    assert tok.engine.startswith("kitoken (exact fast path"), tok.engine
    assert tok.encode_batch(["Hello, world! I like tokenizers."])[0].tolist() == [
        101,
        7592,
        1010,
        2088,
        999,
        1045,
        2066,
        19204,
        17629,
        2015,
        1012,
        102,
    ]
    texts = [
        *shipped_texts(),
        *python_source(60),
        *PROBES,
        *ASCII_PROBES,
        *MIXED_LINES,
        "Unaffable naïve résumé, 東京 and Ελλάδα",
        "[CLS] inside [SEP] text",
        "",
    ]
    assert_same_ids(tok, texts, "bert-base-uncased", special_every=97)


def test_a_capital_sigma_ending_a_word_is_encoded_by_tokenizers():
    """kitoken lower-cases a capital sigma that ends a word to the final sigma, ``tokenizers``
    to the plain one (``wordpiece_chars``' docstring): on BERT's vocabulary, which holds both,
    such words differ on kitoken alone and not on the fast path."""
    tok = load_tokenizer(str(BERT))
    texts = ["ΟΔΥΣΣΕΥΣ", "ο ΣΊΣΥΦΟΣ.", "ΑΣ and more"]
    alone = [list(tok.exact_encoder().engine.encoder.encode(t)) for t in texts]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    assert all(a != w for a, w in zip(alone, want)), (
        "kitoken no longer reads these otherwise: the table can be made again"
    )
    assert_same_ids(tok, texts, "final sigma")


def across_a_space(spec: dict) -> dict:
    """A piece "▁of▁the" the BPE makes first wherever "▁of" meets "▁the"."""
    vocab = spec["model"]["vocab"]
    vocab["\u2581of\u2581the"] = len(vocab)
    spec["model"]["merges"].insert(0, ["\u2581of", "\u2581the"])
    return spec


def taking_whole_words(spec: dict) -> dict:
    spec["model"]["ignore_merges"] = True
    return spec


@pytest.mark.parametrize("edit", [across_a_space, taking_whole_words])
def test_a_file_whose_words_cannot_be_cut_keeps_the_whole_text_one_word(families, tmp_path, edit):
    """With no pre-tokenizer, kitoken cuts words at "▁" only where that cannot change the ids:
    not where a piece spans a space, nor where the BPE takes a word found whole in the
    vocabulary as one piece; there it encodes the text whole, exactly."""
    spec = edit(json.loads(Path(families["sp-bpe-prepend"], "tokenizer.json").read_text(encoding="utf-8")))
    tok = load_tokenizer_from(spec, tmp_path / "edited")
    assert tok.engine.startswith("kitoken (exact fast path"), tok.engine
    assert not tok.exact_encoder().engine.cuts_words
    texts = shipped_texts()[:150]
    assert_same_ids(tok, texts, edit.__name__)
    if edit is across_a_space:  # the piece is made: a cut would have changed these ids
        made = spec["model"]["vocab"]["\u2581of\u2581the"]
        assert any(made in ids for ids in tok.encode_batch(texts, engine="tokenizers"))


@pytest.mark.parametrize("kind", [*KITOKEN, "bert-base-uncased"])
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(text=ADVERSARIAL)
def test_kitoken_gives_the_ids_of_tokenizers_on_adversarial_text(families, kind, text):
    tok = load_tokenizer(families[kind])
    assert (
        tok.encode_batch([text], engine="exact")[0].tolist()
        == tok.encode_batch([text], engine="tokenizers")[0].tolist()
    )


GEMMA_FORM = {  # Gemma's files as transformers 5 writes them: spaces become marks, then a Split on spaces that never cuts
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
}


def test_gemmas_form_runs_on_kitoken_cut_into_words(families, tmp_path):
    spec = {**json.loads(Path(families["sp-bpe-prepend"], "tokenizer.json").read_text(encoding="utf-8")), **GEMMA_FORM}
    tok = load_tokenizer_from(spec, tmp_path / "gemma-form")
    assert tok.engine.startswith("kitoken (exact fast path"), tok.engine
    assert tok.exact_encoder().engine.cuts_words
    assert_same_ids(
        tok, [*shipped_texts()[::4], *PROBES, " leading and trailing ", "\u00a0no-break\u00a0spaces"], "Gemma's form"
    )


def test_a_split_a_later_normalizer_can_feed_is_not_taken_for_inert(families, tmp_path):
    """NFKC after the Replace turns a no-break space into a space, which the Split then cuts at."""
    normalizer = {"type": "Sequence", "normalizers": [GEMMA_FORM["normalizer"], {"type": "NFKC"}]}
    spec = {
        **json.loads(Path(families["sp-bpe-prepend"], "tokenizer.json").read_text(encoding="utf-8")),
        **GEMMA_FORM,
        "normalizer": normalizer,
    }
    tok = load_tokenizer_from(spec, tmp_path / "fed")
    assert (
        tok.engine.startswith("tokenizers") and "not Metaspace or none (nor a Split that never cuts)" in tok.engine
    ), tok.engine
    assert (
        tok.encode_batch(["a\u00a0b c"], add_special_tokens=False)[0].tolist()
        == tok.backend.encode("a\u00a0b c", add_special_tokens=False).ids
    )
    assert (
        len(tok.backend.pre_tokenizer.pre_tokenize_str(tok.backend.normalizer.normalize_str("a\u00a0b"))) == 2
    )  # the Split does cut here


@pytest.mark.parametrize("gemma", [False, True])
def test_a_token_no_merge_makes_goes_to_tokenizers_where_kitoken_gives_it_whole(families, tmp_path, gemma):
    """SentencePiece's control and user-defined pieces (Gemma's ``<unused0>``) sit in the
    vocabulary with no merge that makes them: ``tokenizers`` spells such a word out, kitoken
    takes it whole. Found at load; texts showing one go to ``tokenizers``. Where the text is
    prepended a mark, ``<unused0>`` never starts a word; in Gemma's form it starts the text."""
    spec = json.loads(Path(families["sp-bpe-prepend"], "tokenizer.json").read_text(encoding="utf-8"))
    for token in ("<unused0>", "\u2581<unused1>", "\u2581[@BOS@]"):
        spec["model"]["vocab"][token] = len(spec["model"]["vocab"])
    tok = load_tokenizer_from({**spec, **(GEMMA_FORM if gemma else {})}, tmp_path / "unmade")
    engine = tok.exact_encoder().engine
    assert engine.whole_words == (["<unused0>", "<unused1>", "[@BOS@]"] if gemma else ["<unused1>", "[@BOS@]"])
    texts = ["a <unused1> b", "x [@BOS@]", *(["<unused0>"] if gemma else ["<unused1>"])]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    assert all(list(engine.encoder.encode(t)) != w for t, w in zip(texts, want))  # what the routing is for
    assert_same_ids(tok, [*texts, "<unused0> here", *shipped_texts()[:40]], "tokens no merge makes")


def test_a_sentencepiece_file_kitoken_refuses_runs_on_cached_words_and_says_why(families, tmp_path):
    spec = json.loads(Path(families["sp-bpe-metaspace"], "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {"type": "NFKC"}]}
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(
        Path(families["sp-bpe-metaspace"], "tokenizer_config.json").read_text(encoding="utf-8")
    )
    tok = load_tokenizer(str(tmp_path))
    assert (
        tok.engine.startswith("beamtok cached words")
        and "faster engines refused: " in tok.engine
        and "a Lowercase step" in tok.engine
    ), tok.engine
    spec["pre_tokenizer"] = None  # no pre-tokenizer and a piece across a space: cached words refuse it too
    spec["model"]["vocab"]["e\u2581"] = len(spec["model"]["vocab"])
    with pytest.raises(ConfigError, match=r"kitoken: .*a Lowercase step.*; cached words: .*a piece across a space"):
        load_tokenizer_from(spec, tmp_path / "both").exact_encoder()


def load_tokenizer_from(spec: dict, directory: Path):
    directory.mkdir()
    (directory / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    return load_tokenizer(str(directory))


@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_a_normal_form_kitoken_would_make_with_other_unicode_tables_leaves_it(families, tmp_path, form):
    """kitoken makes NFC and NFKC with Unicode tables of its own, which order or decompose some
    recent marks otherwise than ``tokenizers``' (U+0899 against U+1DC4): such a file is
    refused by name and runs on cached words, which normalize with the file itself."""
    spec = json.loads(Path(families["sp-bpe-metaspace"], "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": "Sequence", "normalizers": [{"type": form}]}
    tok = load_tokenizer_from(spec, tmp_path / form)
    assert tok.engine.startswith("beamtok cached words") and f"its normalizer has an {form} step" in tok.engine, (
        tok.engine
    )
    texts = [f"\u0301{chr(c)}\u0334 a{chr(c)}b" for c in sorted(differing_points(form))]
    assert_same_ids(tok, [*texts, "a\u1dc4\u0899 x", *shipped_texts()[:20]], form)


def test_a_sentencepiece_file_kitoken_cannot_follow_is_refused(families):
    spec = json.loads(Path(families["sp-bpe-metaspace"], "tokenizer.json").read_text(encoding="utf-8"))
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    with pytest.raises(ConfigError, match="its pre-tokenizer is Whitespace, not Metaspace or none"):
        KitokenEncoder(json.dumps(spec), "edited")


def test_the_pipeline_streams_the_same_and_a_pickled_tokenizer_rebuilds_its_engine(families):
    files = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]
    for kind in KITOKEN:
        fast = list(Dataset.from_files(files).tokenize(families[kind]).ensure_bos_eos().concat_chunk(256))
        slow = list(
            Dataset.from_files(files).tokenize(families[kind], engine="tokenizers").ensure_bos_eos().concat_chunk(256)
        )
        assert_items_equal(fast, slow)
        tok = load_tokenizer(families[kind])
        assert tok.engine_choice.encoder is not None
        copy = pickle.loads(pickle.dumps(tok))
        assert [a.tolist() for a in copy.encode_batch(["Hello, World!"])] == [
            a.tolist() for a in tok.encode_batch(["Hello, World!"])
        ]
        assert copy.engine == tok.engine


def test_an_ascii_text_is_normalized_by_the_files_table_and_kitoken_only_cuts_and_encodes(families):
    """BERT's kind: an ASCII text skips kitoken's normalization (the file's own table maps it),
    and that path alone gives the ids of ``tokenizers`` on the shipped ASCII texts and on every
    ASCII character."""
    tok = load_tokenizer(families["wordpiece"])
    engine = tok.exact_encoder().engine
    assert engine.ascii is not None and engine.ascii.encoder.config()["normalization"] == []
    texts = [*[t for t in shipped_texts() if t.isascii()][::3], *ASCII_PROBES, "MiXeD\r\nCase\tand\x0bcontrols\x7f\x00"]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    got = [engine.ascii.encode(t) for t in texts]
    assert [t for t, a, b in zip(texts, got, want) if a != b] == []


def table_characters() -> set[int]:
    table = json.loads(wordpiece_chars.TABLE.read_text(encoding="utf-8"))
    return {c for lo, hi in table["ranges"] for c in range(lo, hi + 1)}


def test_texts_holding_a_character_kitoken_reads_otherwise_are_encoded_by_tokenizers(families):
    """Characters of the table (unassigned, and assigned ones kitoken's tables read otherwise)
    inside words, alone and between spaces: kitoken alone gives other ids, the fast path those
    of ``tokenizers``."""
    tok = load_tokenizer(families["wordpiece"])
    engine = tok.exact_encoder().engine
    odd = sorted(table_characters())
    assigned = [c for c in odd if unicodedata.category(chr(c)) != "Cn"]
    chosen = [0x378, 0xE01EF + 1, *assigned[:: max(1, len(assigned) // 40)]]
    texts = [form.format(chr(c)) for c in chosen for form in ("word{}word", "a {} b", "{}")]
    alone = [list(engine.encoder.encode(t)) for t in texts]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    assert sum(a != w for a, w in zip(alone, want)) > len(texts) // 4  # what the routing is for
    assert_same_ids(tok, texts, "characters read otherwise")


@pytest.mark.parametrize("setting", [0, 17])  # uncased and cleaned as BERT; cased, accents stripped, not cleaned
def test_the_table_holds_every_character_kitoken_reads_otherwise_on_a_sample_of_code_points(setting):
    points = wordpiece_chars.code_points()[setting::11]
    missing = wordpiece_chars.differing_chars(wordpiece_chars.SETTINGS[setting], points) - table_characters()
    assert not missing, f"{len(missing)} characters not in the table, first {[hex(c) for c in sorted(missing)[:8]]}"


def test_a_table_made_with_other_versions_is_refused_by_name_and_cached_words_encode(families, monkeypatch):
    monkeypatch.setattr(wordpiece_chars, "versions", lambda: {"kitoken": "0.0.1", "tokenizers": "0.0.1"})
    wordpiece_chars.routed_chars.cache_clear()
    try:
        tok = load_tokenizer(families["wordpiece"] + "/")
        assert (
            tok.engine.startswith("beamtok cached words")
            and "python -m beamtok._src.engines.wordpiece_chars" in tok.engine
        ), tok.engine
        assert_same_ids(tok, [*PROBES, "\u0378 unassigned"], "cached words")
    finally:
        wordpiece_chars.routed_chars.cache_clear()

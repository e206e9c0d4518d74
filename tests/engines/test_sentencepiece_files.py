"""SentencePiece models as people get them: trained with SentencePiece (its default nmt_nfkc
normalization, a precompiled character map) and converted by ``transformers``, which writes
T5's form (Unigram, Precompiled, WhitespaceSplit then Metaspace) and Llama-2's (BPE with byte
fallback, a Metaspace that does not split). Each takes an exact fast path and gives the ids of
the file as ``tokenizers`` loads it, on the shipped corpus, Python source, the probe strings and
adversarial text; T5's words are cut exactly as its pre-tokenizer cuts them."""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as RustTokenizer

from beamtok import load_tokenizer
from beamtok._src.engines.byte_level_file import PROBES
from beamtok._src.engines.word_cutters import (
    CUT_BEFORE_EVERY_MARK,
    CUT_BEFORE_MARK_AFTER_OTHER,
    WhitespaceMetaspaceWords,
)
from beamtok.testing import sentencepiece_tokenizer

from byte_level_files import ADVERSARIAL, shipped_texts
from conftest import assert_same_ids, built_once, corpus_texts
from test_fast_path_cached_words import python_source, variant

pytest.importorskip("sentencepiece")

# whitespace on either side of the line Rust and Python draw (U+001C to U+001F are whitespace
# to str.split only), the mark itself, and runs of them
SPACES = [
    "\x1c",
    "\x1f",
    "\u3000",
    "\u2028",
    "\x85",
    "\xa0",
    "\u180e",
    "\u200b",
    "\t",
    "\n",
    " ",
    "  ",
    "\u2581",
    "\u2581\u2581",
    " \u2581",
    "\u2581 ",
]
SPACED = st.lists(st.one_of(st.sampled_from(SPACES), st.text("ab\u2581 ", max_size=6), ADVERSARIAL), max_size=10).map(
    "".join
)


def converted(kind: str) -> Path:
    """``sentencepiece_tokenizer(kind)`` on the shipped corpus, once per machine."""
    versions = [importlib.metadata.version(name) for name in ("sentencepiece", "transformers", "tokenizers")]
    key = [versions, inspect.getsource(sentencepiece_tokenizer), corpus_texts()]
    return built_once(
        f"sentencepiece-{kind}", key, lambda directory: sentencepiece_tokenizer(kind, corpus_texts(), directory)
    )


@pytest.fixture(scope="module")
def files() -> dict[str, Path]:
    return {kind: converted(kind) for kind in ("t5", "llama2")}


def reference(directory: Path) -> RustTokenizer:
    return RustTokenizer.from_file(str(directory / "tokenizer.json"))


@pytest.mark.parametrize(
    ("kind", "engine"),
    [
        ("t5", "beamtok compiled Unigram on cut words (exact fast path"),
        ("llama2", "beamtok compiled BPE on marked words (exact fast path"),
    ],
)
def test_a_converted_sentencepiece_file_gives_the_ids_of_tokenizers_on_the_shipped_corpus_and_code(files, kind, engine):
    spec = json.loads((files[kind] / "tokenizer.json").read_text(encoding="utf-8"))
    if kind == "t5":  # the form this test is about, as transformers writes it
        assert spec["normalizer"]["type"] == "Precompiled"
        assert [step["type"] for step in spec["pre_tokenizer"]["pretokenizers"]] == ["WhitespaceSplit", "Metaspace"]
    tok = load_tokenizer(str(files[kind]))
    assert tok.engine.startswith(engine), tok.engine
    if (
        kind == "llama2"
    ):  # one word to tokenizers (a Metaspace that does not split); cut before a "▁" after another character
        assert spec["pre_tokenizer"] == {
            "type": "Metaspace",
            "replacement": "\u2581",
            "prepend_scheme": "first",
            "split": False,
        }
        assert tok.exact_encoder().engine._cutter.native_cut == CUT_BEFORE_MARK_AFTER_OTHER
    texts = [*shipped_texts(), *python_source(), *PROBES, *SPACES, "", "<extra_id_0> inside", "</s> and <s>", "x" * 300]
    assert_same_ids(tok, texts, kind, reference(files[kind]), special_every=97)


@pytest.mark.parametrize("kind", ["t5", "llama2"])
def test_a_converted_sentencepiece_file_gives_the_ids_of_tokenizers_on_adversarial_text(files, kind):
    tok, ref = load_tokenizer(str(files[kind])), reference(files[kind])

    @settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(SPACED)
    def same(text: str) -> None:
        for special in (True, False):
            assert (
                tok.encode_batch([text], special, engine="exact")[0].tolist()
                == ref.encode(text, add_special_tokens=special).ids
            )

    same()


def test_t5_words_are_the_words_its_pre_tokenizer_cuts(files):
    """The cut itself, on both of its ways (``str.split`` and the White_Space pattern), for
    either prepend scheme it takes, with the file's normalizer and with none (T5's maps the
    mark and every other whitespace to a space and drops U+001C: the cut must hold without)."""
    for scheme, normalizer in (("always", True), ("never", True), ("always", False), ("never", False)):
        spec = json.loads((files["t5"] / "tokenizer.json").read_text(encoding="utf-8"))
        spec["pre_tokenizer"]["pretokenizers"][1]["prepend_scheme"] = scheme
        spec["normalizer"] = spec["normalizer"] if normalizer else None
        ref = RustTokenizer.from_str(json.dumps(spec))
        cutter = WhitespaceMetaspaceWords(ref, "\u2581", scheme == "always")

        @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
        @given(SPACED)
        def same_words(text: str) -> None:
            normalized = ref.normalizer.normalize_str(text) if ref.normalizer is not None else text
            words = [word for word, _ in ref.pre_tokenizer.pre_tokenize_str(normalized)]
            assert cutter.words(text) == words, (scheme, text)
            if cutter.native_cut is not None:  # what a compiled engine cuts: the marked text before every mark
                assert cutter.native_cut == CUT_BEFORE_EVERY_MARK
                assert re.findall("\u2581[^\u2581]*", cutter.marked(text)) == words, (scheme, text)

        same_words()
        assert (cutter.native_cut is not None) == (scheme == "always")


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            {
                "pretokenizers": [
                    {"type": "WhitespaceSplit"},
                    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
                ]
            },
            "prepends 'first'",
        ),
        (
            {
                "pretokenizers": [
                    {"type": "WhitespaceSplit"},
                    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False},
                ]
            },
            "does not split",
        ),
        (
            {
                "pretokenizers": [
                    {"type": "Whitespace"},
                    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
                ]
            },
            "a Sequence of \\['Whitespace', 'Metaspace'\\]",
        ),
    ],
    ids=["prepend first", "no split", "another sequence"],
)
def test_what_the_t5_cut_cannot_follow_is_refused_by_name(files, tmp_path, edit, reason):
    path = variant(files["t5"], tmp_path, pre_tokenizer={"type": "Sequence", **edit})
    # the file as it stands: T5Tokenizer would build its own pre-tokenizer over the edited one
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>"})
    )
    engine = load_tokenizer(path).engine
    assert engine.startswith("tokenizers (") and "cached words" in engine, engine
    assert re.search(reason, engine), engine


ASCII = st.text(st.characters(max_codepoint=127), max_size=40) | st.lists(
    st.sampled_from(["\r", "\n", "\r\n", "\t", "\x00", "\x7f", "a", " "]), max_size=12
).map("".join)


MIXED_PIECES = [
    "a b",
    "\r",
    "\n",
    "\r\n",
    "\t",
    "\x00",
    " ",
    "é",
    "e\u0301",
    "\u0301",
    "ﬁ",
    "①",
    "Ａ",
    "語",
    "😀",
    "\u2028",
    "\x85",
    "ß",
    "\u3000",
    "\u200b",
]
MIXED = st.lists(
    st.sampled_from(MIXED_PIECES) | st.text(st.characters(max_codepoint=127), max_size=8), max_size=16
).map("".join)


@pytest.mark.parametrize("normalizer", ["t5's Precompiled", "NFKC", "NFKD", "NFC"])
def test_a_text_past_ascii_is_normalized_line_by_line_as_the_normalizer_does(files, normalizer):
    """A text holding characters past ASCII: its lines holding one by the normalizer, the
    others by the table, joined, give what the normalizer gives the whole text (combining
    marks at a line's start, ``\\r\\n`` at a line's end, compatibility forms, runs of such
    lines); and the normalizer is called on those lines only."""
    from tokenizers import normalizers

    from beamtok._src.engines.quick_normalizers import AsciiTable

    ref = getattr(normalizers, normalizer)() if normalizer.startswith("NF") else reference(files["t5"]).normalizer
    table = AsciiTable(ref)
    seen: list[str] = []

    def normalize(part: str) -> str:
        seen.append(part)
        return ref.normalize_str(part)

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(MIXED)
    def same(text: str) -> None:
        seen.clear()
        assert table.mixed(text, normalize) == ref.normalize_str(text), text
        assert all(not line.isascii() for part in seen for line in part.split("\n") if line)

    same()
    long = "x = 1\n" * 1000 + "café\n" + "y = 2\r\n" * 1000 + "naïve\nﬁ\n" + "z\n" * 10
    seen.clear()
    assert table.mixed(long, normalize) == ref.normalize_str(long)
    assert seen == ["café\n", "naïve\nﬁ\n"]


@pytest.mark.parametrize("normalizer", ["t5's Precompiled", "NFKC", "BERT's"])
def test_an_ascii_text_is_normalized_by_table_as_the_normalizer_does(files, normalizer):
    """Every ASCII character alone and ``\\r\\n`` (one grapheme, which T5's map makes one
    space where its characters alone make two) decide an ASCII text's normalization; the
    table is applied as bytes where each character becomes one character or none (all three
    here), and not at all where nothing changes (NFKC)."""
    from tokenizers import normalizers

    from beamtok._src.engines.quick_normalizers import AsciiTable

    ref = {"NFKC": normalizers.NFKC(), "BERT's": normalizers.BertNormalizer(lowercase=True)}.get(
        normalizer
    ) or reference(files["t5"]).normalizer
    assert AsciiTable.takes(ref) == (
        normalizer != "BERT's"
    )  # BERT's is taken by its own cutter and kitoken's ASCII path
    table = AsciiTable(ref)
    assert table.byte_table is not None and table.unchanged == (normalizer == "NFKC")
    if normalizer == "t5's Precompiled":
        assert table.crlf == " " and ref.normalize_str("\r") + ref.normalize_str("\n") == "  "

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(ASCII)
    def same(text: str) -> None:
        assert table(text) == ref.normalize_str(text), text

    same()

"""Unicode normal forms as ``tokenizers`` makes them: the code points where Python's
``unicodedata`` normalizes otherwise are found, and a text holding one is normalized by
``tokenizers`` itself, every other text by ``unicodedata``, with the same result."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import normalizers

from beamtok import load_tokenizer
from beamtok._src.base.kept_json import TOKENIZER_CACHE_ENV
from beamtok._src.engines.normal_forms import COMPOSING, ExactNormalForm, differing_points

from conftest import assert_same_ids, trained_family

FORMS = ("NFC", "NFKC", "NFD", "NFKD")
# ranges where the Unicode versions of this Python and of tokenizers' tables part ways, and old ones
RANGES = [
    (0x0300, 0x0370),
    (0x0780, 0x0900),
    (0x1A80, 0x1B00),
    (0x1DC0, 0x1E00),
    (0xAC00, 0xAC40),
    (0x10F00, 0x11000),
    (0x11900, 0x11960),
    (0x1E000, 0x1E100),
]


def reference(form: str):
    return getattr(normalizers, form)()


@pytest.mark.parametrize("form", FORMS)
def test_the_points_found_are_those_where_the_two_part_ways(form):
    """Checked one code point at a time over ranges old and new: a point whose probe the
    two normalize otherwise is found, and for a form that composes, so are the parts of a
    canonical composite one of them does not know (U+11938's, Unicode 13)."""
    found = differing_points(form)
    ours = reference(form)
    for lo, hi in RANGES:
        for c in range(lo, hi):
            sandwiched = f"\u0301{chr(c)}\u0334"
            if ours.normalize_str(sandwiched) != unicodedata.normalize(form, sandwiched):
                assert c in found, hex(c)
            theirs, pythons = normalizers.NFD().normalize_str(chr(c)), unicodedata.normalize("NFD", chr(c))
            if form in COMPOSING and theirs != pythons:
                assert c in found and {ord(p) for p in theirs + pythons} <= found, hex(c)
    assert not found & set(range(0x80)) and 0xE9 not in found and 0xAC00 not in found  # ASCII, é, Hangul: alike in both


def alphabet() -> list[str]:
    points = sorted(differing_points("NFC") | differing_points("NFKC"))
    marks = [chr(c) for c in (0x0301, 0x0308, 0x0316, 0x0327, 0x0334, 0x1DC4, 0x05B0)]
    bases = ["a", "e", "A", "\u1100", "\u1161", "\u11a8", "\uac00", "\u00c5", "\u212b", "\ufb01", "\u2460", " ", "\n"]
    return [chr(c) for c in points] + marks + bases


@pytest.mark.parametrize("form", FORMS)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_text_is_normalized_as_tokenizers_normalizes_it(form, data):
    text = data.draw(st.text(alphabet=st.sampled_from(alphabet()), max_size=12))
    assert ExactNormalForm(form)(text) == reference(form).normalize_str(text)


def test_the_two_do_part_ways_here_so_the_tests_above_can_fail():
    """Python 3.11 has Unicode 14.0 and tokenizers' tables are older: NFC puts U+0899 (class
    220, new in 14.0) before a class-230 mark in one of them only. Where both are of one
    version there is nothing to find, and nothing to test."""
    differing = differing_points("NFC")
    if not differing:
        pytest.skip("this Python's unicodedata and tokenizers normalize every code point alike")
    texts = [f"a{chr(c)}\u0301\u0334{chr(c)}" for c in sorted(differing)]
    assert any(unicodedata.normalize("NFC", t) != normalizers.NFC().normalize_str(t) for t in texts)
    assert [ExactNormalForm("NFC")(t) for t in texts] == [normalizers.NFC().normalize_str(t) for t in texts]


def test_the_points_are_kept_for_the_two_versions_and_a_broken_entry_is_found_anew(tmp_path, monkeypatch):
    monkeypatch.setenv(TOKENIZER_CACHE_ENV, str(tmp_path))
    differing_points.cache_clear()
    try:
        found = differing_points("NFD")
        (entry,) = tmp_path.glob("normal-form-NFD-*.json")
        assert f"unicode-{unicodedata.unidata_version}-tokenizers-" in entry.name and json.loads(
            entry.read_text()
        ) == sorted(found)
        entry.write_text(json.dumps([0x41]))
        differing_points.cache_clear()
        assert differing_points("NFD") == {0x41}  # read back, not probed again
        entry.write_text("[1, 2")
        differing_points.cache_clear()
        assert differing_points("NFD") == found and json.loads(entry.read_text()) == sorted(found)
    finally:
        differing_points.cache_clear()


MULTILINGUAL = [
    "Ελληνικά κείμενα",
    "Русский текст",
    "été, où, déjà, naïve, e\u0301te\u0301",
    "größer, Äpfel",
    "中文字符和日本語のテキスト、한국어",
    "ﬁnancial ①②",
    "العربية",
]


def test_a_unigram_file_normalized_by_nfkc_encodes_as_tokenizers_around_the_points():
    """Unigram as ``tokenizers`` trains it normalizes with NFKC alone: its words are now cut
    from Python's NFKC where that is ``tokenizers``' (4x faster on multilingual text), from
    ``tokenizers``' own around the points where the two part ways."""
    tok = load_tokenizer(str(trained_family("unigram")))
    assert type(tok.backend.normalizer).__name__ == "NFKC" and tok.engine_choice.encoder is not None, tok.engine
    texts = [f"a{chr(c)}\u0301 {chr(c)}\u0334x" for c in sorted(differing_points("NFKC"))]
    assert_same_ids(tok, [*texts, *MULTILINGUAL, "\n".join(MULTILINGUAL)], "NFKC's points")

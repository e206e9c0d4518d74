"""Metaspace's marking done on code points (``CodePointBuffer.fill`` with a ``SpaceMarking``)
gives what the same marking done on strings gives (``SpaceMarking.apply``), and the compiled
BPE and Unigram give the same ids either way: spaces anywhere, texts that start with a space,
with the mark or with neither, empty texts, texts longer than a piece of the buffer, and a
buffer filled again after a longer batch."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok._src.engines.bpe_native_encoder import NativeBPE
from beamtok._src.engines.compiled_tables import CodePointBuffer, code_points
from beamtok._src.engines.unigram_native import NativeUnigram
from beamtok._src.engines.word_cutters import (
    CUT_BEFORE_EVERY_MARK,
    CUT_BEFORE_MARK_AFTER_OTHER,
    WHITE_SPACE_WORDS,
    SpaceMarking,
    WhitespaceMetaspaceWords,
    WordsMarking,
)

MARK = "\u2581"
TEXTS = st.lists(st.text(" ab▁é😀\n", max_size=30), max_size=6)


def filled(
    buffer: CodePointBuffer, texts: list[str], marking: SpaceMarking | WordsMarking
) -> tuple[list[int], list[int]]:
    chars, ends = buffer.fill(texts, marking)
    return chars[: int(ends[-1]) if len(ends) else 0].tolist(), ends.tolist()


def marked_by_strings(texts: list[str], marking: SpaceMarking | WordsMarking) -> tuple[list[int], list[int]]:
    chars, ends = code_points([marking.apply(text) for text in texts])
    return chars.tolist(), ends.tolist()


@settings(max_examples=300, deadline=None)
@given(TEXTS, TEXTS, st.booleans())
def test_code_points_marked_in_the_buffer_are_those_of_the_marked_strings(first_batch, second_batch, first):
    marking = SpaceMarking(MARK, first)
    buffer = CodePointBuffer()  # kept from call to call: the second batch reuses the first's room
    for texts in (first_batch, second_batch):
        assert filled(buffer, texts, marking) == marked_by_strings(texts, marking)


def test_texts_longer_than_a_piece_are_marked_across_the_pieces():
    long = (" ab" * CodePointBuffer.PIECE)[1:]  # a space at every piece's edge, somewhere
    texts = [long, " " + long, MARK + long, "", "a"]
    for first in (True, False):
        marking = SpaceMarking(MARK, first)
        assert filled(CodePointBuffer(), texts, marking) == marked_by_strings(texts, marking)


def test_marking_puts_the_mark_first_only_where_the_marked_text_lacks_it():
    marking = SpaceMarking(MARK, True)
    assert [marking.apply(t) for t in ["", " a", "▁a", "a b"]] == ["", "▁a", "▁a", "▁a▁b"]
    assert marking.marks_first(["", " a", "▁a", "a b"]) == [False, False, False, True]
    assert SpaceMarking(MARK, False).apply("a b ") == "a▁b▁"


def bpe_spec() -> dict:
    letters = ["a", "b", "é", MARK, "\n", " "]
    vocab = {
        t: i
        for i, t in enumerate([*letters, MARK + "a", MARK + "a" + "b", "<unk>", *(f"<0x{b:02X}>" for b in range(256))])
    }
    merges = [[MARK, "a"], [MARK + "a", "b"]]
    return {
        "type": "BPE",
        "vocab": vocab,
        "merges": merges,
        "unk_token": "<unk>",
        "fuse_unk": False,
        "byte_fallback": True,
        "ignore_merges": False,
    }


@settings(max_examples=150, deadline=None)
@given(TEXTS.filter(bool), st.booleans(), st.sampled_from([CUT_BEFORE_EVERY_MARK, CUT_BEFORE_MARK_AFTER_OTHER]))
def test_compiled_engines_give_the_same_ids_marking_strings_or_code_points(texts, first, cut):
    marking = SpaceMarking(MARK, first)
    marked = [marking.apply(text) for text in texts]
    bpe = NativeBPE(bpe_spec(), MARK, cut)
    assert [ids.tolist() for ids in bpe.encode(texts, marking)] == [ids.tolist() for ids in bpe.encode(marked)]
    pieces = [
        ["<unk>", 0.0],
        ["a", -1.0],
        ["b", -1.5],
        [MARK, -2.0],
        [MARK + "a", -1.2],
        ["é", -3.0],
        ["\n", -3.0],
        [" ", -3.0],
    ]
    unigram = NativeUnigram(
        {"type": "Unigram", "vocab": pieces, "unk_id": 0, "byte_fallback": False}, lambda words: np.zeros(0, np.int32)
    )
    got = unigram.encode_marked(texts, cut, MARK, marking)
    want = unigram.encode_marked(marked, cut, MARK)
    assert [None if ids is None else ids.tolist() for ids in got] == [
        None if ids is None else ids.tolist() for ids in want
    ]


WHITE = " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\x1c\x1f\u200b"  # and four that are not White_Space
WORDS_TEXTS = st.lists(st.text(WHITE + "ab▁é😀", max_size=30), max_size=6)


@settings(max_examples=300, deadline=None)
@given(WORDS_TEXTS, WORDS_TEXTS)
def test_words_marked_in_the_buffer_are_those_of_the_strings_and_of_the_cutter(first_batch, second_batch):
    """T5's marking (``WhitespaceSplit``, then each word behind a mark): the buffer's code
    points are the marked strings', which the cutter's string operations give (Python's
    ``split()``, with U+001C to U+001F, that it cuts at and Rust does not, set apart) as the
    words cut by Unicode White_Space, each behind a mark, give them."""
    marking = WordsMarking(MARK)
    cutter = WhitespaceMetaspaceWords.__new__(WhitespaceMetaspaceWords)  # its string marking alone, no file
    cutter.string_steps, cutter.ascii, cutter.normal_form, cutter.normalizer, cutter.marking = (
        None,
        None,
        None,
        None,
        marking,
    )
    buffer = CodePointBuffer()
    for texts in (first_batch, second_batch):
        by_words = ["".join(w if w.startswith(MARK) else MARK + w for w in WHITE_SPACE_WORDS(t)) for t in texts]
        assert [cutter.marked(t) for t in texts] == [marking.apply(t) for t in texts] == by_words
        assert filled(buffer, texts, marking) == marked_by_strings(texts, marking)


@settings(max_examples=100, deadline=None)
@given(WORDS_TEXTS.filter(bool))
def test_unigram_gives_the_same_ids_marking_words_as_strings_or_code_points(texts):
    marking = WordsMarking(MARK)
    pieces = [["<unk>", 0.0], ["a", -1.0], ["b", -1.5], [MARK, -2.0], [MARK + "a", -1.2], ["é", -3.0]]
    unigram = NativeUnigram(
        {"type": "Unigram", "vocab": pieces, "unk_id": 0, "byte_fallback": False}, lambda words: np.zeros(0, np.int32)
    )
    got = unigram.encode_marked(texts, CUT_BEFORE_EVERY_MARK, MARK, marking)
    want = unigram.encode_marked([marking.apply(t) for t in texts], CUT_BEFORE_EVERY_MARK, MARK)
    assert [None if ids is None else ids.tolist() for ids in got] == [
        None if ids is None else ids.tolist() for ids in want
    ]

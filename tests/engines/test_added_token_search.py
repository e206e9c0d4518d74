"""Finding added tokens in a text (``added_token_routing.Needles``): the fast paths send a text
holding one to ``tokenizers`` whole, so the search must find every occurrence the plain
``in`` would, for few strings or many, with few first characters or many."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok._src.engines.added_token_routing import Needles

ALPHABET = "<>/|sun ké\n▁"
TOKENS = st.lists(st.text(ALPHABET, min_size=1, max_size=6), min_size=1, max_size=12)


@settings(max_examples=400, derandomize=True)
@given(TOKENS, st.text(ALPHABET, max_size=40))
def test_found_exactly_where_in_finds_one(tokens, text):
    assert Needles(tokens).found_in(text) == any(token in text for token in tokens)


@settings(max_examples=300, derandomize=True)
@given(st.text(ALPHABET, min_size=1, max_size=60), st.data())
def test_a_string_cut_from_the_text_is_found_whatever_its_length(text, data):
    """Strings of every length (the long single strings are searched otherwise), one of them
    often a piece of the text itself, so that both answers are common."""
    lo = data.draw(st.integers(0, len(text) - 1))
    hi = data.draw(st.integers(lo + 1, min(len(text), lo + 14)))
    others = data.draw(st.lists(st.text(ALPHABET, min_size=1, max_size=12), max_size=3))
    tokens = [*others, text[lo:hi] + data.draw(st.sampled_from(["", "s", "<"]))]
    assert Needles(tokens).found_in(text) == any(token in text for token in tokens)


def test_a_text_without_the_first_characters_is_passed_over_and_one_with_them_is_searched():
    needles = Needles(["<s>", "</s>", "<unk>"])
    assert needles.firsts == ("<",)
    assert not needles.found_in("plain prose, no angle bracket")
    assert not needles.found_in("a < b and c > d, no token")  # the first character alone is not a token
    assert needles.found_in("text then </s>")
    grouped = Needles([f"<extra_id_{i}>" for i in range(20)] + ["[CLS]", "[SEP]", "▁x", "§"])
    assert grouped.regex is None and grouped.firsts == ("<", "[", "§", "▁")
    assert grouped.found_in("§") and grouped.found_in("ab<extra_id_13>") and not grouped.found_in("<extra_id_>")
    assert grouped.found_in("[ [SEP]") and not grouped.found_in("[ < ▁ [CL")


def test_many_first_characters_are_searched_with_one_regex_and_a_long_string_alone_with_in():
    many = Needles(["<a>", "[b]", "{c}", "(d)", "|e|"])
    assert many.firsts is None and many.regex is not None
    assert many.found_in("x (d) y") and not many.found_in("< [ { ( |")
    long = Needles(["<|endoftext|>", "\u2008"])
    assert long.firsts == ("<", "\u2008")
    assert long.found_in("a\u2008b") and long.found_in("<|endoftext|>") and not long.found_in("<|endoftext|")


def test_the_empty_string_is_in_every_text():
    assert Needles(["", "<s>"]).found_in("") and Needles([""]).found_in("anything")

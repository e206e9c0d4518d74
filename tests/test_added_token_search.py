"""Finding added tokens in a text (``exact_encoder.Needles``): the fast paths send a text
holding one to ``tokenizers`` whole, so the search must find every occurrence the plain
``in`` would, for few strings or many, with few first characters or many."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok.transforms.exact_encoder import Needles

ALPHABET = "<>/|sun ké\n▁"
TOKENS = st.lists(st.text(ALPHABET, min_size=1, max_size=6), min_size=1, max_size=12)


@settings(max_examples=400, derandomize=True)
@given(TOKENS, st.text(ALPHABET, max_size=40))
def test_found_exactly_where_in_finds_one(tokens, text):
    assert Needles(tokens).found_in(text) == any(token in text for token in tokens)


def test_a_text_without_the_first_characters_is_passed_over_and_one_with_them_is_searched():
    needles = Needles(["<s>", "</s>", "<unk>"])
    assert needles.firsts == ("<",)
    assert not needles.found_in("plain prose, no angle bracket")
    assert not needles.found_in("a < b and c > d, no token")  # the first character alone is not a token
    assert needles.found_in("text then </s>")
    many = Needles([f"<extra_id_{i}>" for i in range(20)] + ["[CLS]", "[SEP]", "▁x", "§"])
    assert many.regex is not None and many.firsts == ("<", "[", "§", "▁")
    assert many.found_in("§") and many.found_in("ab<extra_id_13>") and not many.found_in("<extra_id_>")

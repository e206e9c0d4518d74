"""kitoken, with GPT-2's split rewritten without its look-ahead, encodes exactly as
`tokenizers`: the pieces around whitespace, the whitespace characters a token can join to the
next character (left to tiktoken), tables read back from kitoken, and what is refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamtok import ConfigError, load_tokenizer
from beamtok._src.engines.kitoken_engine import (
    MAX_ROUTED,
    WHITE_SPACE,
    _may_start_non_space,
    _same_ranks,
    kitoken_engine,
    straddling_whitespace,
)

from conftest import TOKENIZER_DIR, modules_blocked

# where GPT-2's look-ahead and the rewrite could part: runs ending in a space or another
# whitespace character, before letters, digits, punctuation, contractions, or at the end
BOUNDARIES = [
    "a\n\nb",
    "x\n'sy",
    "x \n'd",
    "  \n'll",
    "a\n\n",
    "a  ",
    "end\n",
    "\r\n\r\nx",
    " \t\u3000word",
    "'s 's\t's\n's",
    "a\t\t1",
    "b\n\n\n!",
    "c \n \n  \nd",
    "\u2028x\u2029y",
    "e\x85f\xa0g",
    "q\u3000\u3000'",
    "\n'x",
    "tab\tafter\ttab",
    "\u2003\u2003\u2003z",
    "trailing\t\t",
    "   ",
]


@pytest.fixture(scope="module")
def gpt2() -> Any:
    tok = load_tokenizer(str(TOKENIZER_DIR))
    assert tok.engine.startswith("kitoken"), tok.engine
    return tok


def hf_ids(tok: Any, text: str) -> list[int]:
    return list(tok.encode_batch([text], engine="tokenizers")[0].tolist())


def fast_ids(tok: Any, text: str) -> list[int]:
    return list(tok.encode_batch([text], engine="exact")[0].tolist())


@pytest.mark.parametrize("text", BOUNDARIES)
def test_pieces_around_whitespace_encode_as_tokenizers(gpt2, text):
    engine = gpt2.exact_encoder().engine.native
    assert list(engine.encode(text)) == hf_ids(gpt2, text)  # kitoken alone, not routed
    assert fast_ids(gpt2, text) == hf_ids(gpt2, text)


def test_gpt2_has_one_whitespace_character_a_token_joins_to_the_next_and_it_goes_to_tiktoken(gpt2):
    fast = gpt2.exact_encoder().engine
    assert fast.native.routed == {"\u2008"}  # b"\x88\xe8": the end of U+2008, the start of a CJK character
    text = "x\u2008追y and more"
    assert list(fast.native.encode(text)) != hf_ids(gpt2, text)  # kitoken alone would differ here
    assert fast_ids(gpt2, text) == hf_ids(gpt2, text)


def test_a_lone_surrogate_is_encoded_as_tiktoken_encodes_it(gpt2):
    text = "a\ud800b cd"
    assert fast_ids(gpt2, text) == gpt2.exact_encoder().engine.encoding.encode_ordinary(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.sampled_from(sorted(WHITE_SPACE)),
            st.sampled_from(["'s", "'t", "'re", "'ll", "'", "a", "Zz", "7", "!", "語", "é", "😀", "\u2008"]),
            st.text(max_size=8),
        ),
        max_size=30,
    ).map("".join)
)
def test_whitespace_next_to_anything_encodes_as_tokenizers(gpt2, text):
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return
    assert fast_ids(gpt2, text) == hf_ids(gpt2, text)


def test_straddling_whitespace_finds_tokens_that_join_whitespace_to_what_follows():
    base = {bytes([b]): b for b in range(256)}

    def found(*tokens: bytes) -> set[str]:
        return straddling_whitespace({**base, **{t: 256 + i for i, t in enumerate(tokens)}})

    assert found(b"\n\n", b"  ", b"\t\n", b" a") == set()  # within a run, or after a space
    assert found(b"\na") == {"\n"}
    assert found(b"\xa0b") == {"\xa0"}  # the end of U+00A0's bytes (c2 a0), then a letter
    assert found(b"\x80\xe8") == {"\u1680", "\u2000", "\u3000"}  # each ends in 0x80; 0xe8 starts a CJK character
    assert found(b"\x80\x80") == set()  # a continuation byte starts no character
    assert found(b"\x88\xe2\x80\x83") == set()  # U+2008 then U+2003: still whitespace


def test_a_cut_character_counts_as_possibly_not_whitespace():
    assert _may_start_non_space(b"a") and _may_start_non_space(b"\xe8") and _may_start_non_space(b"\xe8\xaa")
    assert not _may_start_non_space(b"\n") and not _may_start_non_space(b"\xe3\x80\x80")  # U+3000
    assert not _may_start_non_space(b"\x80")
    assert _may_start_non_space(b"\x1c")  # Python calls it a space; Unicode's White_Space does not


def test_kitoken_tables_must_equal_tiktoken_ranks(gpt2):
    fast = gpt2.exact_encoder().engine
    ranks = fast.encoding._mergeable_ranks
    model = fast.native.encoder.definition()["model"]["BytePair"]["vocab"]
    assert _same_ranks(model, ranks)
    merged = [i for i, entry in enumerate(model) if len(entry["bytes"]) > 1]
    swapped = [dict(entry) for entry in model]
    a, b = merged[10], merged[11]
    swapped[a], swapped[b] = swapped[b], swapped[a]  # two merges ranked the other way round
    assert not _same_ranks(swapped, ranks)
    renamed = [dict(entry) for entry in model]
    renamed[a]["bytes"] = list(b"\x00\xff\x00")  # another token under that id, the order kept
    assert not _same_ranks(renamed, ranks)
    assert not _same_ranks(model[:-1], ranks)


def joining_ranks(whitespace: list[str]) -> dict[bytes, int]:
    """Every byte, and for each character ``w`` the tokens that build ``w`` + "a" byte by byte."""
    ranks = {bytes([b]): b for b in range(256)}
    for w in whitespace:
        joined = w.encode() + b"a"
        for end in range(2, len(joined) + 1):
            ranks.setdefault(joined[:end], len(ranks))
    return ranks


def test_characters_a_token_joins_to_the_next_go_to_tiktoken_and_too_many_leave_it_in_charge():
    from tokenizers import Tokenizer as RustTokenizer

    from beamtok._src.engines.byte_level_file import GPT2_PATTERN
    from beamtok._src.engines.exact_encoder import ExactEncoder
    from beamtok._src.engines.ranks import tokenizer_json_from_ranks
    from beamtok._src.engines.tiktoken_backend import KitokenByteLevelEncoder, TiktokenEncoder

    few = ["\t", "\x85", "\u3000"]
    tokenizer_json = tokenizer_json_from_ranks(joining_ranks(few), GPT2_PATTERN, {})
    fast = KitokenByteLevelEncoder(tokenizer_json, "joins")
    assert fast.engine_name == "kitoken" and fast.native.routed == set(few)
    texts = ["x\ta b\x85a \u3000a\u3000\u3000a", "\ta", "a\t\ta", "\x85\x85a\n"]
    reference = RustTokenizer.from_str(tokenizer_json)
    assert [ids.tolist() for ids in ExactEncoder(fast).encode_batch(texts)] == [
        e.ids for e in reference.encode_batch_fast(texts)
    ]
    assert list(fast.native.encode("\ta")) != reference.encode("\ta").ids  # kitoken alone would join them

    many = sorted(WHITE_SPACE - {" "})[: MAX_ROUTED + 1]
    tokenizer_json = tokenizer_json_from_ranks(joining_ranks(many), GPT2_PATTERN, {})
    with pytest.raises(ConfigError, match=rf"tokens join {MAX_ROUTED + 1} whitespace characters"):
        kitoken_engine(tokenizer_json, joining_ranks(many))
    with pytest.raises(ConfigError, match="whitespace characters"):
        KitokenByteLevelEncoder(tokenizer_json, "joins-many")
    assert TiktokenEncoder(tokenizer_json, "joins-many").engine_name == "tiktoken"
    from beamtok._src.engines.engine_choice import choose

    # the compiled byte-level engine cuts by the file's own split, so it takes the file; an
    # install without numba gets tiktoken, kitoken refused by name
    choice = choose(RustTokenizer.from_str(tokenizer_json), "joins-many", tokenizer_json)
    assert choice.engine == "beamtok compiled byte-level BPE on the file's split", choice.to_json()
    with modules_blocked("beamtok._src.engines.byte_level_native", "beamtok._src.engines.byte_level_split"):
        choice = choose(RustTokenizer.from_str(tokenizer_json), "joins-many", tokenizer_json)
    refused = {r.candidate: r for r in choice.refused}
    assert choice.engine == "tiktoken" and "whitespace characters" in refused["kitoken"].reason


def test_a_tokenizer_without_every_byte_leaves_tiktoken_in_charge():
    from beamtok._src.engines.byte_level_file import GPT2_PATTERN
    from beamtok._src.engines.ranks import tokenizer_json_from_ranks

    ranks = {token: rank for token, rank in joining_ranks(["\t"]).items() if token != b"\x00"}
    with pytest.raises(ConfigError, match="byte 0x00 has no token"):
        kitoken_engine(tokenizer_json_from_ranks(ranks, GPT2_PATTERN, {}), ranks)

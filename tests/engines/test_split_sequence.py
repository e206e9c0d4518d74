"""DeepSeek-V3's split, a sequence of three isolating Splits before a ByteLevel that does not
split (numbers three at a time, runs of CJK ideographs and kana, then a pattern of ASCII
words, letters and marks, punctuation and symbols, whitespace), cut by the compiled
byte-level engine as ``tokenizers`` cuts it, and the ids of the file's own ``tokenizers`` on
cl100k's ranks with that pre-tokenizer."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from tokenizers import Regex, pre_tokenizers

from beamtok import ConfigError, load_tokenizer
from beamtok._src.engines.byte_level_file import PROBES
from beamtok._src.engines.byte_level_split import IN_SCRIPT, KIND, LETTER, PUNCTUATION
from beamtok._src.engines.char_classes import CharClasses
from beamtok._src.engines.pattern_atoms import alternatives_of
from beamtok._src.engines.ranks import DEEPSEEK_V3_SPLITS
from beamtok._src.engines.split_patterns import split_sample
from beamtok._src.engines.split_rules import SplitNotCut, split_rule_of_sequence
from beamtok._src.engines.tiktoken_backend import TiktokenEncoder

from byte_level_files import ADVERSARIAL, assert_cuts_like_the_file, shipped_texts, short_texts, split_as

DEEPSEEK_V3 = DEEPSEEK_V3_SPLITS
ENGINE = "beamtok compiled byte-level BPE on the file's split"
TEXT = short_texts("aZé中文ひらカナ・ー゛\u3040 \n\r\t12٣½!?.'_/«😀\x00\u0301\u3000")
MIXED = [
    "DeepSeek-V3 は 2024年12月26日 に公開された。価格: $0.27/1M tokens!",
    "中文：深度求索（DeepSeek）发布了V3模型，参数量671B。",
    "ひらがなカタカナ・ー漢字abc",
    "x中1234567a  \n\n  end",
    "a\x00\x00b ...ab «quoted» \u0301a",
]


def sequence_split(patterns: tuple[str, ...]):
    return pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in patterns]
    )


@pytest.fixture(scope="module")
def deepseek_file() -> str:
    """cl100k's ranks with DeepSeek-V3's pre-tokenizer (the vocabulary does not change the cut)."""
    return split_as("cl100k", DEEPSEEK_V3)


def test_the_cut_is_the_files_on_the_split_sample_and_mixed_scripts():
    classes = CharClasses(DEEPSEEK_V3, split_rule_of_sequence(DEEPSEEK_V3))
    split = sequence_split(DEEPSEEK_V3)
    texts = [*split_sample(), *MIXED]
    differ = [t for t in texts if classes.cut(t) != [p for p, _ in split.pre_tokenize_str(t)]]
    assert not differ, f"{len(differ)} cut otherwise, first {differ[0]!r}"
    # each segment is cut by the third split: the kana run loses its middle dot, ー joins the kanji
    assert classes.cut("ひらがなカタカナ・ー漢字abc") == ["ひらがなカタカナ", "・", "ー漢字", "abc"]
    assert classes.table[ord("・")] & (KIND | IN_SCRIPT) == PUNCTUATION | IN_SCRIPT
    assert classes.table[ord("中")] & (KIND | IN_SCRIPT) == LETTER | IN_SCRIPT


def test_the_cut_is_the_files_on_any_text():
    classes = CharClasses(DEEPSEEK_V3, split_rule_of_sequence(DEEPSEEK_V3))
    split = sequence_split(DEEPSEEK_V3)

    assert_cuts_like_the_file(classes, split, TEXT, 500)


def test_ids_are_the_files(deepseek_file):
    tok = load_tokenizer(deepseek_file)
    assert tok.engine.startswith(ENGINE), tok.engine
    texts = [*shipped_texts()[::8], *PROBES, *MIXED]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    got = tok.encode_batch(texts, add_special_tokens=False)
    differ = [t for t, a, b in zip(texts, want, got) if a != b.tolist()]
    assert not differ, f"{len(differ)} differ, first {differ[0][:80]!r}"
    # the rank-order engines take one split, not a sequence, and say so
    with pytest.raises(ConfigError, match="not a regex split followed by ByteLevel"):
        TiktokenEncoder(tok.backend.to_str(), tok.name, reference=tok.backend)


THIRD = alternatives_of(DEEPSEEK_V3[2])
SEQUENCES_REFUSED = {
    "two splits": (DEEPSEEK_V3[1:], "splits 2 times in a row"),
    "numbers whole": ((r"\p{N}+", *DEEPSEEK_V3[1:]), "not numbers a few at a time"),
    "a script by two classes": ((DEEPSEEK_V3[0], "[一-龥]+[ぁ-ゟ]", DEEPSEEK_V3[2]), "not runs of one class"),
    "letters without marks": (
        (*DEEPSEEK_V3[:2], DEEPSEEK_V3[2].replace(r"[\p{L}\p{M}]+", r"\p{L}+")),
        r"(?s)alternative '\[\^.*\]\?\\p\{L\}\+' is not a step of DeepSeek-V3's",
    ),
    "steps out of order": (
        (*DEEPSEEK_V3[:2], "|".join([THIRD[1], THIRD[0], *THIRD[2:]])),
        "steps are letters, ASCII words",
    ),
}


@pytest.mark.parametrize("name", list(SEQUENCES_REFUSED))
def test_other_sequences_are_refused_by_name(name):
    patterns, message = SEQUENCES_REFUSED[name]
    with pytest.raises(SplitNotCut, match=message):
        split_rule_of_sequence(patterns)


def test_ids_are_the_files_on_adversarial_text(deepseek_file):
    """Runs of whitespace, numbers, marks and scripts side by side, as in the byte-level files' tests."""
    tok = load_tokenizer(deepseek_file)

    @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(ADVERSARIAL)
    def same(text: str) -> None:
        want = tok.backend.encode(text, add_special_tokens=False).ids
        assert tok.encode_batch([text], add_special_tokens=False)[0].tolist() == want

    same()

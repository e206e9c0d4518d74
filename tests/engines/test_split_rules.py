"""A byte-level split pattern read into the compiled cut's rule (``engines/split_rules``): every
published spelling of GPT-2's, cl100k's (tiktoken's older and current, Llama 3's), Qwen2's and
o200k's (tiktoken's, Llama 4's) split parses into the rule it cuts by, and what the cut cannot follow is refused by naming the
alternative. That the rule cuts as the file does is test_byte_level_compiled's."""

from __future__ import annotations

import pytest

from beamtok._src.engines.byte_level_file import GPT2_PATTERN
from beamtok._src.engines.pattern_atoms import alternatives_of
from beamtok._src.engines.ranks import CL100K_PATTERN, O200K_PATTERN, QWEN2_PATTERN
from beamtok._src.engines.split_patterns import CL100K_TIKTOKEN_OLDER, CL100K_TODAY
from beamtok._src.engines.split_rules import (
    CONTRACTION_SUFFIX,
    CONTRACTIONS_FIRST,
    LETTERS_AFTER_ANY,
    LETTERS_AFTER_SPACE,
    LETTERS_BY_CASE,
    NEWLINE_ENDS_RUN,
    NUMBERS_AFTER_SPACE,
    PUNCTUATION_AFTER_SPACE,
    PUNCTUATION_NEWLINES,
    PUNCTUATION_SLASHES,
    TRAILING_WHOLE,
    SplitNotCut,
    SplitRule,
    split_rule_of,
)

GPT2 = SplitRule(0, CONTRACTIONS_FIRST | LETTERS_AFTER_SPACE | NUMBERS_AFTER_SPACE | PUNCTUATION_AFTER_SPACE)
CL100K = SplitRule(
    3, CONTRACTIONS_FIRST | LETTERS_AFTER_ANY | PUNCTUATION_AFTER_SPACE | PUNCTUATION_NEWLINES | NEWLINE_ENDS_RUN
)
O200K = SplitRule(
    3,
    LETTERS_BY_CASE
    | CONTRACTION_SUFFIX
    | LETTERS_AFTER_ANY
    | PUNCTUATION_AFTER_SPACE
    | PUNCTUATION_NEWLINES
    | PUNCTUATION_SLASHES
    | NEWLINE_ENDS_RUN,
)
# Llama 4's and gpt-oss's files and others write o200k's split with the classes and the
# contractions in other orders and spellings: the same rule
O200K_REORDERED = (
    O200K_PATTERN.replace(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{M}\p{Lo}\p{Lm}\p{Lt}\p{Lu}]")
    .replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)?", "(?:'(?i:[sdmt]|ll|ve|re))?")
    .replace(r"[\r\n/]*", r"[/\r\n]*")
)
SPELLINGS = {
    "gpt2 (ByteLevel's own)": (GPT2_PATTERN, GPT2),
    "r50k as tiktoken writes it": (
        r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
        SplitRule(0, GPT2.shape | TRAILING_WHOLE),
    ),
    "cl100k, Llama 3, the converter's default": (CL100K_PATTERN, CL100K),
    "cl100k, tiktoken 0.5-0.8": (CL100K_TIKTOKEN_OLDER, CL100K),
    "cl100k, tiktoken today": (CL100K_TODAY, SplitRule(0, CL100K.shape | TRAILING_WHOLE)),
    "qwen2": (QWEN2_PATTERN, SplitRule(1, CL100K.shape)),
    "qwen2, digits as a class": (QWEN2_PATTERN.replace(r"|\p{N}|", r"|[\p{N}]|"), SplitRule(1, CL100K.shape)),
    "contractions listed one by one, any case": (
        CL100K_PATTERN.replace(
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?i:'s)|(?i:'t)|(?i:'re)|(?i:'ve)|(?i:'m)|(?i:'ll)|(?i:'d)"
        ),
        CL100K,
    ),
    "o200k, tiktoken's and Llama 4's": (O200K_PATTERN, O200K),
    "o200k, classes and contractions in other orders": (O200K_REORDERED, O200K),
    "o200k, space before letters, no contraction after": (
        O200K_PATTERN.replace(r"[^\r\n\p{L}\p{N}]?", " ?").replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)?", ""),
        SplitRule(3, O200K.shape & ~(LETTERS_AFTER_ANY | CONTRACTION_SUFFIX) | LETTERS_AFTER_SPACE),
    ),
    "no contractions, whole numbers": (
        r"""\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
        SplitRule(0, PUNCTUATION_AFTER_SPACE),
    ),
}


@pytest.mark.parametrize("name", list(SPELLINGS))
def test_each_spelling_parses_into_its_rule(name):
    pattern, rule = SPELLINGS[name]
    assert split_rule_of(pattern) == rule


O200K_ALTERNATIVES = alternatives_of(O200K_PATTERN)
REFUSED = {
    "o200k's runs in the other order": (
        "|".join([O200K_ALTERNATIVES[1], O200K_ALTERNATIVES[0], *O200K_ALTERNATIVES[2:]]),
        "in the order",
    ),
    "o200k's capitals needing lower case after": (
        O200K_PATTERN.replace(r"\p{M}]*[\p{Ll}", r"\p{M}]+[\p{Ll}", 1),
        "letters by case other than o200k's two runs",
    ),
    "o200k's runs with two prefixes": (
        O200K_PATTERN.replace(r"[^\r\n\p{L}\p{N}]?", " ?", 1),
        "differ in the character before them",
    ),
    "o200k's capitals possessive": (
        O200K_PATTERN.replace(r"\p{M}]*[", r"\p{M}]*+[", 1),
        "not a step the compiled cut takes",
    ),
    "letters by lower case alone": (
        O200K_PATTERN.replace(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", r"\p{Ll}"),
        "letters by case other than o200k's",
    ),
    "a greedy run before $": (CL100K_TODAY.replace(r"\s++$", r"\s+$"), r"'\\s\+\$'.*greedy run before \$"),
    "contractions after the letters": (
        r"""[^\r\n\p{L}\p{N}]?\p{L}+|(?i:'s|'t|'re|'ve|'m|'ll|'d)|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
        "the contraction .* comes after letters",
    ),
    "a contraction missing": (GPT2_PATTERN.replace("'d|", ""), "its contractions are"),
    "contractions in two case modes": (GPT2_PATTERN.replace("'s|", "(?i:'s)|"), "mix case-sensitive"),
    "no numbers": (
        r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
        "no alternative for numbers",
    ),
    "whitespace before numbers": (r""" ?\p{L}+|\s+(?!\S)| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+""", "in the order"),
    "DeepSeek-V3's third split": (
        r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
        "is not a step the compiled cut takes",
    ),
    "a lazy run": (CL100K_PATTERN.replace(r"\p{L}+", r"\p{L}+?"), "lazy repetition"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_the_cut_cannot_follow_is_refused_by_name(name):
    pattern, message = REFUSED[name]
    with pytest.raises(SplitNotCut, match=message):
        split_rule_of(pattern)

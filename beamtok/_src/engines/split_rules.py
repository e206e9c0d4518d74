r"""A byte-level split pattern read into the parameters of the compiled cut (``byte_level_split``).

Byte-level BPE files split text with one alternation before merging, and the published ones
are variations on GPT-2's: an apostrophe and a contraction, a run of letters after an optional
character, numbers, punctuation, then rules for whitespace. Files spell the same split in many
ways (tiktoken's older and current cl100k, ``transformers``' converter, Llama 3's and Qwen2's
files; ``(?i:'s|'t|...)`` or ``'(?i:[sdmt]|ll|ve|re)``; possessive or greedy quantifiers), so
the pattern is parsed, alternative by alternative, as Oniguruma (``tokenizers``' engine) reads
it, and each alternative is matched to one step of the cut:

- **contractions**: alternatives that match a finite set of strings, together
  ``'s 't 're 've 'm 'll 'd``, in one case mode (which letters count is asked of the file's own
  split for each character: ``byte_level_split``);
- **letters**: a run of ``\p{L}`` after an optional character, either any that is not a
  letter, number, ``\r`` or ``\n`` (cl100k) or a space (GPT-2), or none; or o200k's two
  runs by case, each after that optional character and before an optional contraction:
  capitals (``\p{Lu}``, ``\p{Lt}``, and ``\p{Lm}``, ``\p{Lo}``, ``\p{M}``, which count as
  either case) then at least one lower-case letter, else at least one capital then any
  lower case;
- **numbers**: a run of ``\p{N}`` of at most ``n`` (``{1,n}``; ``\p{N}`` alone is one; ``+``
  and Oniguruma's ``{1,3}+``, "one or more of ``{1,3}``", are the whole run), after an
  optional space or none;
- **punctuation**: a run of neither whitespace, letters nor numbers after an optional space
  or none, then any ``\r``/``\n`` (and ``/`` in o200k's) or none;
- **whitespace**: a possessive run that ends the text (``\s++$``), a run that ends at its last
  newline (``\s*[\r\n]+`` or ``\s*[\r\n]``), a run not followed by a non-space
  (``\s+(?!\S)``), then one or more whitespace characters (``\s+`` or ``\s``).

The steps must come in this order (the first alternative that matches wins); contractions
and the first two whitespace rules are optional. Anything else is refused by naming the
alternative: a greedy ``\s+$`` (which Oniguruma ends before any newline), a lazy run, letters
by case other than o200k's. DeepSeek-V3's pre-tokenizer splits three times in a row; its
sequence is read by :func:`split_rule_of_sequence`, whose third pattern has steps of its own
(ASCII words, letters and marks, punctuation and symbols). A parsed rule is then held to the
file's split on the split sample and probes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from beamtok._src.engines.pattern_atoms import UNBOUNDED, Atom, CharSet, alternatives_of, atoms_of
from beamtok._src.engines.pattern_literals import literal_strings

__all__ = [
    "CONTRACTIONS_FIRST",
    "CONTRACTION_SUFFIX",
    "LETTERS_AFTER_ANY",
    "LETTERS_AFTER_SPACE",
    "LETTERS_BY_CASE",
    "NEWLINE_ENDS_RUN",
    "NUMBERS_AFTER_SPACE",
    "PUNCTUATION_AFTER_SPACE",
    "PUNCTUATION_NEWLINES",
    "PUNCTUATION_SLASHES",
    "SCRIPT_SEQUENCE",
    "TRAILING_WHOLE",
    "SplitNotCut",
    "SplitRule",
    "split_rule_of",
    "split_rule_of_sequence",
]

# the bits of SplitRule.shape, read by the compiled cut
TRAILING_WHOLE = 1
NEWLINE_ENDS_RUN = 2
LETTERS_AFTER_ANY = 4
LETTERS_AFTER_SPACE = 8
NUMBERS_AFTER_SPACE = 16
PUNCTUATION_AFTER_SPACE = 32
PUNCTUATION_NEWLINES = 64
CONTRACTIONS_FIRST = 128  # contractions are alternatives of their own, before the letters
LETTERS_BY_CASE = 256  # o200k's two letter steps: capitals then lower case, and capitals alone
CONTRACTION_SUFFIX = 512  # a contraction may end a run of letters (o200k)
PUNCTUATION_SLASHES = 1024  # the run after punctuation takes ``/`` as well as newlines (o200k)
SCRIPT_SEQUENCE = 2048  # DeepSeek-V3's three splits: numbers, a script's runs, then its pattern

CONTRACTIONS = frozenset({"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"})


class SplitNotCut(ValueError):
    """A split pattern the compiled cut does not take; the message names the alternative."""


@dataclass(frozen=True)
class SplitRule:
    """How the compiled cut splits one file's text.

    Attributes:
        numbers: Numbers a piece holds at most (0: the whole run).
        shape: The other steps' options, as bits (``TRAILING_WHOLE``, ``LETTERS_AFTER_ANY``...).
    """

    numbers: int
    shape: int


LETTERS = CharSet(False, frozenset({"p{L}"}))
CAPITALS = CharSet(False, frozenset({"p{Lu}", "p{Lt}", "p{Lm}", "p{Lo}", "p{M}"}))
LOWER_CASE = CharSet(False, frozenset({"p{Ll}", "p{Lm}", "p{Lo}", "p{M}"}))
NUMBERS = CharSet(False, frozenset({"p{N}"}))
SPACE = CharSet(False, frozenset({" "}))
NEWLINES = CharSet(False, frozenset({"\r", "\n"}))
NEWLINES_AND_SLASH = CharSet(False, frozenset({"\r", "\n", "/"}))
WHITESPACE = CharSet(False, frozenset({"\\s"}))
NOT_WHITESPACE = CharSet(True, frozenset({"\\s"}))
NOT_WORD_OR_NEWLINE = CharSet(True, frozenset({"\r", "\n", "p{L}", "p{N}"}))
PUNCTUATION = CharSet(True, frozenset({"\\s", "p{L}", "p{N}"}))
ASCII_PUNCTUATION = CharSet(False, frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"))
ASCII_LETTERS = CharSet(False, frozenset({"A-Z", "a-z"}))
NOT_WORD_PUNCTUATION_OR_NEWLINE = CharSet(True, frozenset({"\r", "\n", "p{L}", "p{P}", "p{S}"}))
LETTERS_AND_MARKS = CharSet(False, frozenset({"p{L}", "p{M}"}))
PUNCTUATION_AND_SYMBOLS = CharSet(False, frozenset({"p{P}", "p{S}"}))


@functools.lru_cache(maxsize=64)
def split_rule_of(pattern: str) -> SplitRule:
    """The rule by which the compiled cut splits as ``pattern`` does (see the module docstring).

    Args:
        pattern: A byte-level file's split pattern, as its ``tokenizer.json`` holds it.

    Returns:
        The rule's parameters.

    Raises:
        SplitNotCut: Naming the first alternative the cut does not take, or what is out of order.
    """
    steps: list[str] = []
    numbers, shape = 0, 0
    cases: set[bool] = set()
    contractions: set[str] = set()
    letter_bits: set[int] = set()
    try:
        alternatives = alternatives_of(pattern)
    except ValueError as e:
        raise SplitNotCut(f"its pattern has {e}") from None
    for alternative in alternatives:
        expanded = literal_strings(alternative)
        if expanded is not None and all(s.startswith("'") for s in expanded[0]):
            if steps and steps[-1] != "contractions":
                raise SplitNotCut(f"the contraction '{alternative}' comes after {steps[-1]}")
            contractions |= expanded[0]
            cases.add(expanded[1])
            steps.append("contractions")
            shape |= CONTRACTIONS_FIRST
            continue
        atoms = _atoms_or_refuse(alternative)
        for atom in atoms:
            if atom.literals:
                contractions |= atom.literals
                cases.add(atom.ignore_case)
        step, numbers_here, bits = _step_of(alternative, atoms)
        if step in ("letters", "capitals"):
            letter_bits.add(bits)
        steps.append(step)
        numbers = numbers_here if step == "numbers" else numbers
        shape |= bits
    if contractions and contractions != CONTRACTIONS:
        raise SplitNotCut(f"its contractions are {sorted(contractions)}, not {sorted(CONTRACTIONS)}")
    if len(cases) > 1:
        raise SplitNotCut("its contractions mix case-sensitive and case-insensitive alternatives")
    if len(letter_bits) > 1:
        raise SplitNotCut("its two letter steps differ in the character before them or the contraction after")
    _check_order([step for step in steps if step != "contractions"], shape)
    return SplitRule(numbers=numbers, shape=shape)


def split_rule_of_sequence(patterns: tuple[str, ...]) -> SplitRule:
    """The rule of a file whose pre-tokenizer splits with ``patterns`` one after another: one
    pattern (:func:`split_rule_of`), or DeepSeek-V3's three (numbers ``n`` at a time, runs of
    one class of a script's characters, then a pattern of ASCII words, letters and marks,
    punctuation and symbols, and the whitespace rules).

    Args:
        patterns: The patterns of the file's isolating splits, in order.

    Raises:
        SplitNotCut: Naming the split or the alternative the cut does not take.
    """
    if len(patterns) == 1:
        return split_rule_of(patterns[0])
    if len(patterns) != 3:
        raise SplitNotCut(
            f"it splits {len(patterns)} times in a row; the compiled cut takes one split or DeepSeek-V3's three"
        )
    numbers, script = _atoms_or_refuse(patterns[0]), _atoms_or_refuse(patterns[1])
    if len(numbers) != 1 or numbers[0].chars != NUMBERS or numbers[0].low != 1 or numbers[0].high == UNBOUNDED:
        raise SplitNotCut(f"its first split '{patterns[0]}' is not numbers a few at a time, as DeepSeek-V3's")
    if len(script) != 1 or script[0].chars is None or script[0].chars.negated or not _run(script[0], script[0].chars):
        raise SplitNotCut(f"its second split '{patterns[1]}' is not runs of one class, as DeepSeek-V3's")
    shape = SCRIPT_SEQUENCE | PUNCTUATION_AFTER_SPACE | PUNCTUATION_NEWLINES
    steps = []
    try:
        alternatives = alternatives_of(patterns[2])
    except ValueError as e:
        raise SplitNotCut(f"its third split has {e}") from None
    for alternative in alternatives:
        atoms = _atoms_or_refuse(alternative)
        form = tuple((atom.chars, atom.low, atom.high) for atom in atoms)
        possessive = any(atom.possessive for atom in atoms)
        step = None if possessive else next((name for name, want in _DEEPSEEK_STEPS.items() if form == want), None)
        if step is not None:
            steps.append(step)
        else:
            whitespace = _whitespace_step(atoms)
            if whitespace is None or whitespace[0] == "trailing":
                raise SplitNotCut(f"its third split's alternative '{alternative}' is not a step of DeepSeek-V3's")
            steps.append(whitespace[0])
            shape |= whitespace[2]
    expected = [
        "ASCII words",
        "letters",
        "punctuation",
        *(["newline"] if shape & NEWLINE_ENDS_RUN else []),
        "not before text",
        "whitespace",
    ]
    if steps != expected:
        raise SplitNotCut(f"its third split's steps are {', '.join(steps)}, not {', '.join(expected)}")
    return SplitRule(numbers=numbers[0].high, shape=shape)


# the first steps of DeepSeek-V3's third split, each as its atoms' (class, low, high); none
# possessive (a possessive optional character would not give a mark back to the letters)
_DEEPSEEK_STEPS = {
    "ASCII words": ((ASCII_PUNCTUATION, 1, 1), (ASCII_LETTERS, 1, UNBOUNDED)),
    "letters": ((NOT_WORD_PUNCTUATION_OR_NEWLINE, 0, 1), (LETTERS_AND_MARKS, 1, UNBOUNDED)),
    "punctuation": ((SPACE, 0, 1), (PUNCTUATION_AND_SYMBOLS, 1, UNBOUNDED), (NEWLINES, 0, UNBOUNDED)),
}


def _atoms_or_refuse(alternative: str) -> list[Atom]:
    try:
        return atoms_of(alternative)
    except ValueError as e:
        raise SplitNotCut(f"its alternative '{alternative}' is not a step the compiled cut takes: {e}") from None


_ORDER = ("letters", "capitals", "numbers", "punctuation", "trailing", "newline", "not before text", "whitespace")
_REQUIRED = ("letters", "numbers", "punctuation", "not before text", "whitespace")


def _check_order(steps: list[str], shape: int) -> None:
    for step in (*_REQUIRED, "capitals") if shape & LETTERS_BY_CASE else _REQUIRED:
        if step not in steps:
            raise SplitNotCut(f"it has no alternative for {step}, a step the compiled cut always takes")
    if len(set(steps)) != len(steps):
        twice = next(step for step in steps if steps.count(step) > 1)
        raise SplitNotCut(f"it has two alternatives for {twice}")
    if steps != sorted(steps, key=_ORDER.index):
        raise SplitNotCut(f"its alternatives come in the order {', '.join(steps)}, not {', '.join(_ORDER)}")


def _step_of(alternative: str, atoms: list[Atom]) -> tuple[str, int, int]:
    """Which step of the cut ``atoms`` is, with its numbers bound and shape bits."""
    letters = _letters_step(atoms)
    if letters is not None:
        return letters
    optional_space = bool(atoms) and atoms[0].chars == SPACE and (atoms[0].low, atoms[0].high) == (0, 1)
    body = atoms[1:] if optional_space else atoms
    if len(body) == 1 and body[0].chars == NUMBERS and body[0].low == 1 and not body[0].look:
        bound = 0 if body[0].high == UNBOUNDED else body[0].high
        return "numbers", bound, NUMBERS_AFTER_SPACE if optional_space else 0
    if body and _run(body[0], PUNCTUATION) and len(body) <= 2:
        bits = PUNCTUATION_AFTER_SPACE if optional_space else 0
        if len(body) == 1:
            return "punctuation", 0, bits
        if body[1].chars in (NEWLINES, NEWLINES_AND_SLASH) and body[1].low == 0 and body[1].high == UNBOUNDED:
            slashes = PUNCTUATION_SLASHES if body[1].chars == NEWLINES_AND_SLASH else 0
            return "punctuation", 0, bits | PUNCTUATION_NEWLINES | slashes
    if not optional_space:
        whitespace = _whitespace_step(atoms)
        if whitespace is not None:
            return whitespace
    raise SplitNotCut(f"its alternative '{alternative}' is not a step the compiled cut takes{_hint(atoms)}")


def _letters_step(atoms: list[Atom]) -> tuple[str, int, int] | None:
    """A run of letters after an optional character (a space, or any but letters, numbers and
    newlines), either ``\\p{L}+`` or one of o200k's two runs by case (capitals then lower
    case, ``[...]*[...]+``; capitals then any lower case, ``[...]+[...]*``), where o200k may
    end it with an optional contraction."""
    bits, body = 0, atoms
    if body and body[0].chars in (NOT_WORD_OR_NEWLINE, SPACE) and (body[0].low, body[0].high) == (0, 1):
        bits = LETTERS_AFTER_ANY if body[0].chars == NOT_WORD_OR_NEWLINE else LETTERS_AFTER_SPACE
        by_case_prefix = not body[0].possessive  # o200k backs off its optional character onto a mark
        body = body[1:]
    else:
        by_case_prefix = True
    if len(body) == 1 and _run(body[0], LETTERS):
        return "letters", 0, bits
    if body and body[-1].literals and (body[-1].low, body[-1].high) == (0, 1):
        bits |= CONTRACTION_SUFFIX
        body = body[:-1]
    if (
        len(body) != 2
        or (body[0].chars, body[1].chars) != (CAPITALS, LOWER_CASE)
        or UNBOUNDED != body[0].high
        or UNBOUNDED != body[1].high
        or body[0].possessive
        or body[1].possessive
        or not by_case_prefix
    ):
        return None
    if (body[0].low, body[1].low) == (0, 1):
        return "letters", 0, bits | LETTERS_BY_CASE
    if (body[0].low, body[1].low) == (1, 0):
        return "capitals", 0, bits | LETTERS_BY_CASE
    return None


def _whitespace_step(atoms: list[Atom]) -> tuple[str, int, int] | None:
    if not atoms or atoms[0].chars != WHITESPACE:
        return None
    first = atoms[0]
    if len(atoms) == 1 and first.low == 1 and first.high in (1, UNBOUNDED):
        return "whitespace", 0, 0
    if len(atoms) != 2:
        return None
    second = atoms[1]
    if second.end and first.possessive and (first.low, first.high) == (1, UNBOUNDED):
        return "trailing", 0, TRAILING_WHOLE
    if (
        second.chars == NEWLINES
        and (first.low, first.high) == (0, UNBOUNDED)
        and not first.possessive
        and second.low == 1
        and second.high in (1, UNBOUNDED)
    ):
        return "newline", 0, NEWLINE_ENDS_RUN
    if second.look == NOT_WHITESPACE and (first.low, first.high) == (1, UNBOUNDED) and not first.possessive:
        return "not before text", 0, 0
    return None


def _hint(atoms: list[Atom]) -> str:
    members = {m for atom in atoms if atom.chars is not None for m in atom.chars.members}
    if members & {"p{Lu}", "p{Ll}", "p{Lt}", "p{Lm}", "p{Lo}", "p{M}"}:
        return " (letters by case other than o200k's two runs)"
    if any(atom.literals for atom in atoms):
        return " (a group where the cut takes none)"
    if any(atom.end and not atoms[0].possessive for atom in atoms):
        return " (a greedy run before $, which Oniguruma also ends before a newline)"
    return ""


def _run(atom: Atom, chars: CharSet) -> bool:
    """Whether ``atom`` is one or more of ``chars`` (greedy or possessive cut the same here)."""
    return atom.chars == chars and atom.low == 1 and atom.high == UNBOUNDED

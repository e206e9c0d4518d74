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
  letter, number, ``\r`` or ``\n`` (cl100k) or a space (GPT-2), or none;
- **numbers**: a run of ``\p{N}`` of at most ``n`` (``{1,n}``; ``\p{N}`` alone is one; ``+``
  and Oniguruma's ``{1,3}+``, "one or more of ``{1,3}``", are the whole run), after an
  optional space or none;
- **punctuation**: a run of neither whitespace, letters nor numbers after an optional space
  or none, then any ``\r``/``\n`` or none;
- **whitespace**: a possessive run that ends the text (``\s++$``), a run that ends at its last
  newline (``\s*[\r\n]+`` or ``\s*[\r\n]``), a run not followed by a non-space
  (``\s+(?!\S)``), then one or more whitespace characters (``\s+`` or ``\s``).

The steps must come in this order (the first alternative that matches wins); contractions
and the first two whitespace rules are optional. Anything else is refused by naming the
alternative: letters split by case (o200k's), a greedy ``\s+$`` (which Oniguruma ends before
any newline). A parsed rule is then held to the file's split on the split sample and probes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from beamtok._src.engines.pattern_literals import literal_strings
from beamtok._src.engines.split_patterns import class_end, outside_classes

__all__ = [
    "LETTERS_AFTER_ANY",
    "LETTERS_AFTER_SPACE",
    "NEWLINE_ENDS_RUN",
    "NUMBERS_AFTER_SPACE",
    "PUNCTUATION_AFTER_SPACE",
    "PUNCTUATION_NEWLINES",
    "TRAILING_WHOLE",
    "SplitNotCut",
    "SplitRule",
    "split_rule_of",
]

# the bits of SplitRule.shape, read by the compiled cut
TRAILING_WHOLE = 1
NEWLINE_ENDS_RUN = 2
LETTERS_AFTER_ANY = 4
LETTERS_AFTER_SPACE = 8
NUMBERS_AFTER_SPACE = 16
PUNCTUATION_AFTER_SPACE = 32
PUNCTUATION_NEWLINES = 64

CONTRACTIONS = frozenset({"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"})
UNBOUNDED = -1


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


@dataclass(frozen=True)
class _Set:
    """A character class: its members (properties as ``p{L}``, ``\\s``, or single characters)
    and whether it is negated."""

    negated: bool
    members: frozenset[str]


@dataclass(frozen=True)
class _Atom:
    """A class (or ``$``, or a negative look-ahead at ``look``) with its repetition."""

    chars: _Set | None
    low: int = 1
    high: int = 1  # UNBOUNDED for no upper bound
    possessive: bool = False
    look: _Set | None = None  # (?!...) of this class
    end: bool = False  # $


LETTERS = _Set(False, frozenset({"p{L}"}))
NUMBERS = _Set(False, frozenset({"p{N}"}))
SPACE = _Set(False, frozenset({" "}))
NEWLINES = _Set(False, frozenset({"\r", "\n"}))
WHITESPACE = _Set(False, frozenset({"\\s"}))
NOT_WHITESPACE = _Set(True, frozenset({"\\s"}))
NOT_WORD_OR_NEWLINE = _Set(True, frozenset({"\r", "\n", "p{L}", "p{N}"}))
PUNCTUATION = _Set(True, frozenset({"\\s", "p{L}", "p{N}"}))

_ESCAPED = {"r": "\r", "n": "\n", "t": "\t", "s": "\\s", "f": "\f", "v": "\v"}


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
    try:
        alternatives = _alternatives(pattern)
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
            continue
        try:
            atoms = _atoms(alternative)
        except ValueError as e:
            by_case = " (letters split by case, as o200k's)" if "\\p{Lu}" in alternative else ""
            raise SplitNotCut(
                f"its alternative '{alternative}' is not a step the compiled cut takes: {e}{by_case}"
            ) from None
        step, numbers_here, bits = _step_of(alternative, atoms)
        steps.append(step)
        numbers = numbers_here if step == "numbers" else numbers
        shape |= bits
    if contractions and contractions != CONTRACTIONS:
        raise SplitNotCut(f"its contractions are {sorted(contractions)}, not {sorted(CONTRACTIONS)}")
    if len(cases) > 1:
        raise SplitNotCut("its contractions mix case-sensitive and case-insensitive alternatives")
    _check_order([step for step in steps if step != "contractions"])
    return SplitRule(numbers=numbers, shape=shape)


_ORDER = ("letters", "numbers", "punctuation", "trailing", "newline", "not before text", "whitespace")
_REQUIRED = ("letters", "numbers", "punctuation", "not before text", "whitespace")


def _check_order(steps: list[str]) -> None:
    for step in _REQUIRED:
        if step not in steps:
            raise SplitNotCut(f"it has no alternative for {step}, a step the compiled cut always takes")
    if len(set(steps)) != len(steps):
        twice = next(step for step in steps if steps.count(step) > 1)
        raise SplitNotCut(f"it has two alternatives for {twice}")
    if steps != sorted(steps, key=_ORDER.index):
        raise SplitNotCut(f"its alternatives come in the order {', '.join(steps)}, not {', '.join(_ORDER)}")


def _step_of(alternative: str, atoms: list[_Atom]) -> tuple[str, int, int]:
    """Which step of the cut ``atoms`` is, with its numbers bound and shape bits."""
    optional_space = bool(atoms) and atoms[0].chars == SPACE and (atoms[0].low, atoms[0].high) == (0, 1)
    body = atoms[1:] if optional_space else atoms
    if len(atoms) == 2 and _run(atoms[1], LETTERS) and (atoms[0].low, atoms[0].high) == (0, 1):
        if atoms[0].chars == NOT_WORD_OR_NEWLINE:
            return "letters", 0, LETTERS_AFTER_ANY
        if atoms[0].chars == SPACE:
            return "letters", 0, LETTERS_AFTER_SPACE
    if len(atoms) == 1 and _run(atoms[0], LETTERS):
        return "letters", 0, 0
    if len(body) == 1 and body[0].chars == NUMBERS and body[0].low == 1 and not body[0].look:
        bound = 0 if body[0].high == UNBOUNDED else body[0].high
        return "numbers", bound, NUMBERS_AFTER_SPACE if optional_space else 0
    if body and _run(body[0], PUNCTUATION) and len(body) <= 2:
        bits = PUNCTUATION_AFTER_SPACE if optional_space else 0
        if len(body) == 1:
            return "punctuation", 0, bits
        if body[1].chars == NEWLINES and body[1].low == 0 and body[1].high == UNBOUNDED:
            return "punctuation", 0, bits | PUNCTUATION_NEWLINES
    if not optional_space:
        whitespace = _whitespace_step(atoms)
        if whitespace is not None:
            return whitespace
    raise SplitNotCut(f"its alternative '{alternative}' is not a step the compiled cut takes{_hint(atoms)}")


def _whitespace_step(atoms: list[_Atom]) -> tuple[str, int, int] | None:
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


def _hint(atoms: list[_Atom]) -> str:
    members = {m for atom in atoms if atom.chars is not None for m in atom.chars.members}
    if members & {"p{Lu}", "p{Ll}", "p{Lt}", "p{Lm}", "p{Lo}", "p{M}"}:
        return " (letters split by case)"
    if any(atom.end and not atoms[0].possessive for atom in atoms):
        return " (a greedy run before $, which Oniguruma also ends before a newline)"
    return ""


def _run(atom: _Atom, chars: _Set) -> bool:
    """Whether ``atom`` is one or more of ``chars`` (greedy or possessive cut the same here)."""
    return atom.chars == chars and atom.low == 1 and atom.high == UNBOUNDED


def _alternatives(pattern: str) -> list[str]:
    """``pattern`` cut at its top-level ``|``."""
    cuts = [i for i, c, depth in outside_classes(pattern) if c == "|" and depth == 0]
    return [pattern[a + 1 : b] for a, b in zip([-1, *cuts], [*cuts, len(pattern)])]


def _atoms(alternative: str) -> list[_Atom]:
    """``alternative`` as classes with their repetitions; ValueError for what is not one."""
    atoms: list[_Atom] = []
    i = 0
    while i < len(alternative):
        c = alternative[i]
        if c == "$":
            atoms.append(_Atom(None, end=True))
            i += 1
            continue
        if alternative.startswith("(?!", i):
            close = alternative.find(")", i)
            inner = _atoms(alternative[i + 3 : close]) if close > 0 else []
            if len(inner) != 1 or inner[0].chars is None or (inner[0].low, inner[0].high) != (1, 1):
                raise ValueError("a look-ahead of more than one class")
            atoms.append(_Atom(None, look=inner[0].chars))
            i = close + 1
            continue
        if c in "()|":
            raise ValueError("a group")
        if c == "[":
            end = class_end(alternative, i)
            chars = _class(alternative[i + 1 : end - 1])
        elif c == "\\":
            end, chars = _escape(alternative, i)
        elif c in "*+?{.^":
            raise ValueError(f"{c!r} where a class was expected")
        else:
            end, chars = i + 1, _Set(False, frozenset({c}))
        i, low, high, possessive = _repetition(alternative, end)
        atoms.append(_Atom(chars, low, high, possessive))
    return atoms


def _escape(text: str, i: int) -> tuple[int, _Set]:
    letter = text[i + 1 : i + 2]
    if letter in ("p", "P") and text[i + 2 : i + 3] == "{":
        close = text.index("}", i)
        return close + 1, _Set(letter == "P", frozenset({f"p{{{text[i + 3 : close]}}}"}))
    if letter == "S":
        return i + 2, NOT_WHITESPACE
    if letter in _ESCAPED:
        return i + 2, _Set(False, frozenset({_ESCAPED[letter]}))
    if letter and not letter.isalnum():
        return i + 2, _Set(False, frozenset({letter}))
    raise ValueError(f"the escape \\{letter}")


def _class(body: str) -> _Set:
    negated = body.startswith("^")
    i = 1 if negated else 0
    members: set[str] = set()
    while i < len(body):
        if body[i] == "\\":
            i, chars = _escape(body, i)
            if chars.negated:
                raise ValueError("a negated class inside a class")
            members |= chars.members
        elif body[i + 1 : i + 2] == "-" and i + 2 < len(body):
            raise ValueError(f"the range {body[i : i + 3]!r}")
        else:
            members.add(body[i])
            i += 1
    return _Set(negated, frozenset(members))


def _repetition(text: str, i: int) -> tuple[int, int, int, bool]:
    """The repetition after an atom ending at ``i``: (where it ends, low, high, possessive).
    ``{n,m}+`` is Oniguruma's "one or more of ``{n,m}``", not possessive."""
    c = text[i : i + 1]
    if c == "{":
        close = text.index("}", i)
        low_text, _, high_text = text[i + 1 : close].partition(",")
        low = int(low_text or 0)
        high = low if "," not in text[i:close] else (int(high_text) if high_text else UNBOUNDED)
        i = close + 1
        if text[i : i + 1] == "+":
            return i + 1, low, UNBOUNDED, False
        if text[i : i + 1] == "?":
            raise ValueError("a lazy repetition")
        return i, low, high, False
    bounds = {"*": (0, UNBOUNDED), "+": (1, UNBOUNDED), "?": (0, 1)}.get(c)
    if bounds is None:
        return i, 1, 1, False
    mark = text[i + 1 : i + 2]
    if mark == "?":
        raise ValueError("a lazy repetition")
    return i + 1 + (mark == "+"), bounds[0], bounds[1], mark == "+"

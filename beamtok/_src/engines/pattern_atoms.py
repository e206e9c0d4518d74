r"""One alternative of a byte-level split pattern read as a sequence of atoms, as Oniguruma
(``tokenizers``' engine) reads it: character classes (``[^\r\n\p{L}\p{N}]``, ``\p{N}``, ``\s``,
a single character) with their repetition, ``$``, a negative look-ahead of one class, and an
optional group of literal strings (o200k's ``(?i:'s|'t|...)?`` after a run of letters).
``split_rules`` matches the atoms to the steps of the compiled cut."""

from __future__ import annotations

from dataclasses import dataclass

from beamtok._src.engines.pattern_literals import literal_strings
from beamtok._src.engines.split_patterns import class_end, group_end, outside_classes

__all__ = ["UNBOUNDED", "Atom", "CharSet", "alternatives_of", "atoms_of"]

UNBOUNDED = -1


@dataclass(frozen=True)
class CharSet:
    """A character class: its members (properties as ``p{L}``, ``\\s``, ranges as ``A-Z``, or
    single characters) and whether it is negated."""

    negated: bool
    members: frozenset[str]


@dataclass(frozen=True)
class Atom:
    """A class (or ``$``, a negative look-ahead at ``look``, or a group of ``literals``) with
    its repetition."""

    chars: CharSet | None
    low: int = 1
    high: int = 1  # UNBOUNDED for no upper bound
    possessive: bool = False
    look: CharSet | None = None  # (?!...) of this class
    end: bool = False  # $
    literals: frozenset[str] = frozenset()  # a group matching these strings
    ignore_case: bool = False  # the literals' case mode


_ESCAPED = {"r": "\r", "n": "\n", "t": "\t", "s": "\\s", "f": "\f", "v": "\v"}


def alternatives_of(pattern: str) -> list[str]:
    """``pattern`` cut at its top-level ``|``; ValueError for a nested or unclosed class."""
    cuts = [i for i, c, depth in outside_classes(pattern) if c == "|" and depth == 0]
    return [pattern[a + 1 : b] for a, b in zip([-1, *cuts], [*cuts, len(pattern)])]


def atoms_of(alternative: str) -> list[Atom]:
    """``alternative`` as classes with their repetitions; ValueError for what is not one."""
    atoms: list[Atom] = []
    i = 0
    while i < len(alternative):
        c = alternative[i]
        if c == "$":
            atoms.append(Atom(None, end=True))
            i += 1
            continue
        if alternative.startswith("(?!", i):
            close = alternative.find(")", i)
            inner = atoms_of(alternative[i + 3 : close]) if close > 0 else []
            if len(inner) != 1 or inner[0].chars is None or (inner[0].low, inner[0].high) != (1, 1):
                raise ValueError("a look-ahead of more than one class")
            atoms.append(Atom(None, look=inner[0].chars))
            i = close + 1
            continue
        if c == "(":
            end = group_end(alternative, i)
            literals = literal_strings(alternative[i:end])
            if literals is None:
                raise ValueError("a group")
            i, low, high, possessive = _repetition(alternative, end)
            atoms.append(Atom(None, low, high, possessive, literals=literals[0], ignore_case=literals[1]))
            continue
        if c in ")|":
            raise ValueError("a group")
        if c == "[":
            end = class_end(alternative, i)
            chars = _class(alternative[i + 1 : end - 1])
        elif c == "\\":
            end, chars = _escape(alternative, i)
        elif c in "*+?{.^":
            raise ValueError(f"{c!r} where a class was expected")
        else:
            end, chars = i + 1, CharSet(False, frozenset({c}))
        i, low, high, possessive = _repetition(alternative, end)
        atoms.append(Atom(chars, low, high, possessive))
    return atoms


def _escape(text: str, i: int) -> tuple[int, CharSet]:
    letter = text[i + 1 : i + 2]
    if letter in ("p", "P") and text[i + 2 : i + 3] == "{":
        close = text.index("}", i)
        return close + 1, CharSet(letter == "P", frozenset({f"p{{{text[i + 3 : close]}}}"}))
    if letter == "S":
        return i + 2, CharSet(True, frozenset({"\\s"}))
    if letter in _ESCAPED:
        return i + 2, CharSet(False, frozenset({_ESCAPED[letter]}))
    if letter and not letter.isalnum():
        return i + 2, CharSet(False, frozenset({letter}))
    raise ValueError(f"the escape \\{letter}")


def _class(body: str) -> CharSet:
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
            members.add(body[i : i + 3])  # a range, as "A-Z"
            i += 3
        else:
            members.add(body[i])
            i += 1
    return CharSet(negated, frozenset(members))


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

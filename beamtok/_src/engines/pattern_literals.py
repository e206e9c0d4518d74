"""The strings an alternative of a split pattern matches, where it matches a finite set of
literal strings: ``'s``, ``(?i:'s|'t|'re)``, ``'(?i:[sdmt]|ll|ve|re)`` (groups, ``(?i:...)``
and classes of single characters; no repetition). ``split_rules`` reads a pattern's
contractions through it, however they are spelled."""

from __future__ import annotations

from beamtok._src.engines.split_patterns import class_end

__all__ = ["literal_strings"]


def literal_strings(alternative: str) -> tuple[frozenset[str], bool] | None:
    """The strings ``alternative`` matches and whether case is ignored, where it matches a
    finite set of literal strings in one case mode; None otherwise.

    Args:
        alternative: One alternative of a split pattern.
    """
    try:
        strings, ignore_case, end = _finite_sequence(alternative, 0, False)
    except ValueError:
        return None
    if end != len(alternative) or ignore_case is None:
        return None
    return frozenset(strings), ignore_case


def _finite_sequence(text: str, i: int, ignore_case: bool) -> tuple[set[str], bool | None, int]:
    """Alternatives of sequences from ``i`` to the closing ``)`` or the end: (strings, the one
    case mode of every literal, or None where there is none yet, where it stopped)."""
    options: set[str] = set()
    current = {""}
    modes: set[bool] = set()
    while i < len(text) and text[i] != ")":
        c = text[i]
        if c == "|":
            options |= current
            current = {""}
            i += 1
            continue
        if c == "(":
            flags = ignore_case
            if text.startswith("(?i:", i):
                flags, i = True, i + 4
            elif text.startswith("(?:", i):
                i += 3
            elif text.startswith("(?", i):
                raise ValueError("a group of another kind")
            else:
                i += 1
            inner, mode, i = _finite_sequence(text, i, flags)
            if text[i : i + 1] != ")":
                raise ValueError("an unclosed group")
            i += 1
            pieces = inner
            if mode is not None:
                modes.add(mode)
        elif c == "[":
            end = class_end(text, i)
            body = text[i + 1 : end - 1]
            if body.startswith("^") or "\\" in body or "-" in body[1:-1]:
                raise ValueError("a class of more than letters")
            pieces, i = set(body), end
            modes.add(ignore_case)
        elif c in "\\*+?{$.^":
            raise ValueError("not a literal")
        else:
            pieces, i = {c}, i + 1
            if c.isalpha():
                modes.add(ignore_case)
        if text[i : i + 1] in ("*", "+", "?", "{"):
            raise ValueError("a repetition")
        current = {a + b for a in current for b in pieces}
    options |= current
    if len(modes) > 1:
        raise ValueError("two case modes")
    return options, (modes.pop() if modes else None), i

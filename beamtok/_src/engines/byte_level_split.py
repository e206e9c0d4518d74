r"""A byte-level split, as ``tokenizers`` reads the file's pattern, cut in compiled code.

Byte-level BPE files (GPT-2, cl100k in each of its spellings, Llama 3, Qwen2, o200k) cut a text with
one regular expression before merging. ``tokenizers`` runs it through Oniguruma; this module
cuts the same pieces with a hand-written scan whose options (:class:`SplitRule`) are read from
the pattern itself (``split_rules``). At a piece's start:

1. ``'`` and a contraction (``s``, ``t``, ``m``, ``d``, ``ll``, ``ve``, ``re``, in the case
   the pattern takes, and whatever Oniguruma's case folding takes for them: ``ſ`` is an ``s``),
   where the rule has contractions of their own;
2. an optional character before a run of letters: any that is not a letter, number, ``\r``
   or ``\n`` (cl100k; a possessive or a greedy ``?`` cut the same: backing off the optional
   character leaves a non-letter to start the run), a space (GPT-2), or none. Where letters
   split by case (o200k) the run is capitals then at least one lower-case letter, else at
   least one capital then any lower case (``\p{Lm}``, ``\p{Lo}`` and marks count as both),
   each tried with the optional character and then without, and ending in an optional
   contraction;
3. numbers, after an optional space where the rule has one (GPT-2): ``n`` at a time
   (``\p{N}{1,3}``; Qwen2's ``\p{N}`` is one), or the whole run (``\p{N}+``, and
   ``\p{N}{1,3}+``, which Oniguruma reads as "one or more of ``{1,3}``", where tiktoken reads
   it as possessive: see ``split_patterns``);
4. an optional space, a run of characters that are neither whitespace, letters nor numbers,
   then any ``\r``/``\n`` where the rule takes them (cl100k, not GPT-2) and ``/`` (o200k);
5. whitespace: where the rule has ``\s++$`` (tiktoken's current cl100k) a run that reaches
   the end of the text is one piece; where it has a newline rule (``\s*[\r\n]+`` and
   ``\s*[\r\n]`` cut the same) a run holding ``\r`` or ``\n`` ends after the last of them;
   else a run that reaches the end is one piece, a longer one leaves its last character to
   the next piece (``\s+(?!\S)``), and one character alone is a piece.

A character is read through a class: letter, number, ``\r``/``\n``, other whitespace,
other, or (where letters split by case) mark, with bits for the contraction letters and the
cases. The classes are not Python's: Oniguruma carries
its own Unicode tables, which differ from the ``regex`` module's and ``unicodedata``'s on
thousands of code points (characters newer than its tables). So each character's class is
asked of the file's own pattern, run by ``tokenizers`` on a few short strings, the first time
the character is met (:class:`CharClasses`); the answer is then checked by cutting strings
that put the character in every context that tells classes apart, here and by
``tokenizers``; a character whose cuts differ is sent with its text to another engine.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from beamtok._src.engines.compiled_tables import compiled, inlined
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
    SplitRule,
)

__all__ = ["CharClasses", "classes_for", "piece_end"]

UNKNOWN, LETTER, NUMBER, OTHER, SPACE, NEWLINE, ROUTED, MARK = 0, 1, 2, 3, 4, 5, 6, 7
KIND = 7  # the class bits of a table entry
CONTRACTS, DOUBLE_L, BEFORE_E, LAST_E = 8, 16, 32, 64  # a letter's place in ``'s``, ``'ll``, ``'ve``/``'re``
CAPITAL, LOWER = 128, 256  # where letters split by case: in the capitals' class, the lower case's
CODE_POINTS = 0x110000
APOSTROPHE, SPACE_CHAR, SLASH = 39, 32, 47


@inlined
def _run_end(chars: np.ndarray, i: int, end: int, table: np.ndarray, kind: int) -> int:  # pragma: no cover - compiled
    while i < end and table[chars[i]] & KIND == kind:
        i += 1
    return i


@inlined
def _contraction_end(chars: np.ndarray, i: int, end: int, table: np.ndarray) -> int:  # pragma: no cover - compiled
    """Where the contraction at ``chars[i]`` ends; ``i`` where none starts there."""
    if i + 1 >= end or chars[i] != APOSTROPHE:
        return i
    first = table[chars[i + 1]]
    if first & CONTRACTS:
        return i + 2
    if i + 2 < end:
        second = table[chars[i + 2]]
        if (first & DOUBLE_L and second & DOUBLE_L) or (first & BEFORE_E and second & LAST_E):
            return i + 3
    return i


@inlined
def _by_case_end(
    chars: np.ndarray, s: int, end: int, table: np.ndarray, lower_required: bool
) -> int:  # pragma: no cover - compiled
    """Where o200k's run of letters from ``chars[s]`` ends, -1 where none: capitals then at
    least one lower case (``lower_required``), else at least one capital then any lower case.
    The capitals' run is greedy and gives back what the lower case needs, as Oniguruma's is."""
    r = s
    while r < end and table[chars[r]] & CAPITAL:
        r += 1
    if lower_required and not (r < end and table[chars[r]] & LOWER):
        while r > s and not table[chars[r - 1]] & LOWER:
            r -= 1  # the last capital that is also lower case ends the piece
        return r if r > s else -1
    if not lower_required and r == s:
        return -1
    while r < end and table[chars[r]] & LOWER:
        r += 1
    return r


@inlined
def _letters_by_case(
    chars: np.ndarray, i: int, end: int, table: np.ndarray, c: int, kind: int, shape: int
) -> int:  # pragma: no cover - compiled
    """o200k's two letter steps at ``chars[i]``, each with its optional character first and
    then without it, as the alternation is tried; -1 where neither matches."""
    prefixed = i + 1 < end and (
        (shape & LETTERS_AFTER_ANY and kind != LETTER and kind != NUMBER and kind != NEWLINE)
        or (shape & LETTERS_AFTER_SPACE and c == SPACE_CHAR)
    )
    for lower_required in (True, False):
        for start in (i + 1, i):
            if start == i + 1 and not prefixed:
                continue
            e = _by_case_end(chars, start, end, table, lower_required)
            if e >= 0:
                return _contraction_end(chars, e, end, table) if shape & CONTRACTION_SUFFIX else e
    return -1


@inlined
def piece_end(
    chars: np.ndarray, i: int, end: int, table: np.ndarray, numbers: int, shape: int
) -> int:  # pragma: no cover - compiled
    """Where the piece that starts at ``chars[i]`` ends, in a text ending at ``end`` whose
    characters all have a known class, cut by the rule of ``numbers`` and ``shape`` (see the
    module docstring for each step)."""
    c = chars[i]
    kind = table[c] & KIND
    if shape & CONTRACTIONS_FIRST and c == APOSTROPHE:
        j = _contraction_end(chars, i, end, table)
        if j > i:
            return j
    if shape & LETTERS_BY_CASE:
        j = _letters_by_case(chars, i, end, table, c, kind, shape)
        if j >= 0:
            return j
    elif kind == LETTER:
        return _run_end(chars, i + 1, end, table, LETTER)
    following = table[chars[i + 1]] & KIND if i + 1 < end else UNKNOWN
    if (
        following == LETTER
        and not shape & LETTERS_BY_CASE
        and (
            (shape & LETTERS_AFTER_ANY and kind != NUMBER and kind != NEWLINE)
            or (shape & LETTERS_AFTER_SPACE and c == SPACE_CHAR)
        )
    ):
        return _run_end(chars, i + 2, end, table, LETTER)
    if kind == NUMBER or (shape & NUMBERS_AFTER_SPACE and c == SPACE_CHAR and following == NUMBER):
        first_digit = i if kind == NUMBER else i + 1
        j = first_digit + 1
        while j < end and table[chars[j]] & KIND == NUMBER and (numbers == 0 or j - first_digit < numbers):
            j += 1
        return j
    punctuation = following == OTHER or following == MARK
    j = i + 1 if shape & PUNCTUATION_AFTER_SPACE and c == SPACE_CHAR and punctuation else i
    if table[chars[j]] & KIND == OTHER or table[chars[j]] & KIND == MARK:
        j += 1
        while j < end and (table[chars[j]] & KIND == OTHER or table[chars[j]] & KIND == MARK):
            j += 1  # marks count as punctuation where letters split by case (o200k): elsewhere they are OTHER
        if shape & PUNCTUATION_SLASHES:
            while j < end and (table[chars[j]] & KIND == NEWLINE or chars[j] == SLASH):
                j += 1
            return j
        return _run_end(chars, j, end, table, NEWLINE) if shape & PUNCTUATION_NEWLINES else j
    run_end, last_newline = i, -1  # whitespace
    while run_end < end:
        k = table[chars[run_end]] & KIND
        if k == NEWLINE:
            last_newline = run_end
        elif k != SPACE:
            break
        run_end += 1
    if shape & TRAILING_WHOLE and run_end == end:
        return end
    if shape & NEWLINE_ENDS_RUN and last_newline >= 0:
        return last_newline + 1
    if run_end == end:
        return end
    return run_end - 1 if run_end - i >= 2 else i + 1


@compiled
def _piece_ends(
    chars: np.ndarray, table: np.ndarray, numbers: int, shape: int
) -> np.ndarray:  # pragma: no cover - compiled
    ends = np.empty(chars.shape[0], dtype=np.int64)
    n, i = 0, 0
    while i < chars.shape[0]:
        i = piece_end(chars, i, chars.shape[0], table, numbers, shape)
        ends[n] = i
        n += 1
    return ends[:n]


class CharClasses:
    """Each code point's class for one file's pattern (``table``), learned from the file's
    own split the first time the code point is met (see the module docstring). A class is
    written to ``table`` once checked, from unknown to its value, so kernels in other threads
    only ever read a checked class or none; the checks cut with a private copy (``_trial``)
    that also holds the classes being checked."""

    def __init__(self, pattern: str, rule: SplitRule) -> None:
        from tokenizers import Regex, pre_tokenizers

        self.rule = rule
        self._by_case = bool(rule.shape & LETTERS_BY_CASE)
        self._split = pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)
        self.table = np.zeros(CODE_POINTS, dtype=np.uint16)
        self.table[0xD800:0xE000] = ROUTED  # lone surrogates: UTF-8 has no bytes for them
        self._trial = self.table.copy()
        self._lock = threading.RLock()  # a check learns the other characters of its strings
        self._pid = os.getpid()
        self.learn(np.arange(128, dtype=np.uint32))

    def cut(self, text: str) -> list[str]:
        """``text`` cut here (its characters' classes learned first); ValueError where it
        holds a character sent to another engine."""
        return self._cut(text, self.table)

    def _cut(self, text: str, table: np.ndarray) -> list[str]:
        chars = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        self.learn(np.unique(chars))
        if (table[chars] & KIND == ROUTED).any():
            raise ValueError(f"{text!r} holds a character this cut does not take")
        ends = _piece_ends(chars, table, self.rule.numbers, self.rule.shape)
        return [text[a:b] for a, b in zip([0, *ends.tolist()], ends.tolist())]

    def learn(self, code_points: np.ndarray) -> None:
        """Classify those of ``code_points`` not yet known: each asked of the file's split,
        then all checked at once on one text of their contexts, and one by one where that
        text is cut otherwise than the file cuts it."""
        if not (self._trial[code_points] == UNKNOWN).any():
            return
        if self._pid != os.getpid():  # forked while another thread may have held it: a lock of this process
            self._lock, self._pid = threading.RLock(), os.getpid()
        with self._lock:
            new = [chr(code) for code in np.unique(code_points[self._trial[code_points] == UNKNOWN]).tolist()]
            for c in new:
                self._trial[ord(c)] = self._asked_class(c)
            asked = [c for c in new if self._trial[ord(c)] != ROUTED]
            trial = self._trial
            if self._differs("\n\n".join(text for c in asked for text in _contexts(c, trial[ord(c)], self._by_case))):
                for c in asked:
                    if any(self._differs(text) for text in _contexts(c, trial[ord(c)], self._by_case)):
                        self._trial[ord(c)] = ROUTED
            for c in new:
                self.table[ord(c)] = self._trial[ord(c)]

    def _pieces(self, text: str) -> list[str]:
        return [piece for piece, _ in self._split.pre_tokenize_str(text)]

    def _differs(self, text: str) -> bool:
        """Whether ``text`` is cut here otherwise than by the file's split (with the classes
        being checked)."""
        try:
            return self._cut(text, self._trial) != self._pieces(text)
        except ValueError:
            return True

    def _asked_class(self, c: str) -> int:
        """``c``'s class from the pieces the file's split cuts around it."""
        if c in "\r\n":
            return NEWLINE
        if self._by_case:
            return self._asked_by_case(c)
        pieces = self._pieces
        if pieces(f"a{c}") == [f"a{c}"]:
            return LETTER | self._contraction_flags(c, "'")
        if pieces(f"!{c}") == [f"!{c}"]:
            return OTHER
        if pieces(f"{c} ") == [f"{c} "]:  # whitespace: a run that ends the text is one piece in every rule
            return SPACE
        if pieces(f"{c}a") == [c, "a"]:
            return NUMBER
        return ROUTED

    def _asked_by_case(self, c: str) -> int:
        """``c``'s class where letters split by case (o200k): whitespace, a number and
        punctuation as the other rules tell them, a mark from a letter by a run of
        punctuation taking it, then a letter's (or a mark's) cases from the runs it joins."""
        pieces = self._pieces
        if pieces(f"{c} ") == [f"{c} "]:
            return SPACE
        if pieces(f"{c}a") == [c, "a"]:
            return NUMBER
        if pieces(f"{c}!") == [f"{c}!"]:
            return OTHER
        flags = MARK if pieces(f"!!{c}") == [f"!!{c}"] else LETTER
        if pieces(f"{c}Aa") == [f"{c}Aa"]:
            flags |= CAPITAL  # it starts a run of capitals
        if pieces(f"{c}A") != [f"{c}A"]:
            flags |= LOWER  # it is no run of capitals alone before one
        if not flags & (CAPITAL | LOWER):
            return ROUTED
        if flags & KIND == LETTER:
            flags |= self._contraction_flags(c, "a'")
        return flags

    def _contraction_flags(self, c: str, before: str) -> int:
        """Which contractions ``c`` takes a place in, after ``before`` (an apostrophe, or a
        letter and one where contractions end a run of letters)."""
        pieces = self._pieces
        flags = 0
        if pieces(f"{before}{c}x") == [f"{before}{c}", "x"]:
            flags |= CONTRACTS
        if pieces(f"{before}{c}lx") == [f"{before}{c}l", "x"] and pieces(f"{before}l{c}x") == [f"{before}l{c}", "x"]:
            flags |= DOUBLE_L
        if pieces(f"{before}{c}ex") == [f"{before}{c}e", "x"]:
            flags |= BEFORE_E
        if pieces(f"{before}v{c}x") == [f"{before}v{c}", "x"]:
            flags |= LAST_E
        return flags

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("CharClasses are rebuilt, not pickled")


_SHARED: dict[tuple[str, SplitRule], CharClasses] = {}
_SHARED_LOCK = threading.Lock()


def classes_for(pattern: str, rule: SplitRule) -> CharClasses:
    """The process's classes for one spelling: what one file's split taught holds for every
    file that splits with the same pattern, so each character is learned once a process."""
    with _SHARED_LOCK:
        classes = _SHARED.get((pattern, rule))
        if classes is None:
            classes = _SHARED[(pattern, rule)] = CharClasses(pattern, rule)
        return classes


def _contexts(c: str, kind: int, by_case: bool) -> tuple[str, ...]:
    """Strings that put ``c`` (of class ``kind``) after and before each class (and each case,
    where letters split by case): where a wrong class would cut otherwise. Contractions only
    tell letters apart, and a text's end only whitespace, so those strings are cut for those classes alone (the file's split runs at
    about a microsecond a character: the checks are most of what learning a character costs)."""
    texts: tuple[str, ...] = (f"a{c} {c}1{c}{c}!{c}'{c}x {c} \n{c}  {c}{c}'s{c}\n\n{c}\r{c} {c}", c * 5)
    if by_case:
        texts = (*texts, f"A{c}a {c}A a{c}A{c}Aa!!{c}!{c}{c}! Ab{c}{c}A'{c}x a'{c}/\n/{c}/", f"{c}A", f"a'{c}x")
    if kind & KIND == LETTER:
        return (*texts, f"'{c}{c}x", f"'l{c}x", f"'v{c}x")
    if kind & KIND in (SPACE, NEWLINE):
        return (*texts, c, f"{c} ", f" {c}", f"{c}  ")
    return texts

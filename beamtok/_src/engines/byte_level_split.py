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

DeepSeek-V3's split is a sequence of three: numbers ``n`` at a time, then runs of a script's
characters (CJK ideographs and kana), then a pattern on each segment these leave (a run of
the script's characters, or the text between such runs and numbers; its look-ahead sees the
segment's end as the text's end): ASCII punctuation and the ASCII letters
after it; letters and marks after an optional character that is not a letter, punctuation, a
symbol or a newline; punctuation and symbols after an optional space, then newlines; the
whitespace rules. Characters that start none of these (controls, unassigned) are one piece up
to where one starts.

A character is read through its class in a table (``table``: letter, number, ``\r``/``\n``,
other whitespace, other, and where the rule needs them mark, punctuation and a script's
characters, with bits for the contraction letters, the cases and ASCII), which
``char_classes`` learns from the file's own split.
"""

from __future__ import annotations

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
    SCRIPT_SEQUENCE,
    TRAILING_WHOLE,
)

__all__ = ["piece_end", "piece_ends"]

UNKNOWN, LETTER, NUMBER, OTHER, SPACE, NEWLINE, ROUTED, MARK, PUNCTUATION = range(9)
KIND = 15  # the class bits of a table entry
CONTRACTS, DOUBLE_L, BEFORE_E, LAST_E = 16, 32, 64, 128  # a letter's place in ``'s``, ``'ll``, ``'ve``/``'re``
CAPITAL, LOWER = 256, 512  # where letters split by case: in the capitals' class, the lower case's
# DeepSeek-V3's splits: ``[A-Za-z]``, the ASCII punctuation, a character of the script's runs
ASCII_LETTER, ASCII_PUNCTUATION, IN_SCRIPT = 1024, 2048, 4096
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
    if shape & SCRIPT_SEQUENCE:
        return _sequence_piece_end(chars, i, end, table, numbers, shape)
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
    return _whitespace_end(chars, i, end, table, shape)


@inlined
def _whitespace_end(
    chars: np.ndarray, i: int, end: int, table: np.ndarray, shape: int
) -> int:  # pragma: no cover - compiled
    """Where the whitespace piece at ``chars[i]`` ends; in a sequence of splits (DeepSeek-V3's)
    a number or a script's character ends the text the pattern sees, as the text's end does."""
    run_end, last_newline = i, -1
    while run_end < end:
        k = table[chars[run_end]] & KIND
        if k == NEWLINE:
            last_newline = run_end
        elif k != SPACE:
            break
        run_end += 1
    at_end = run_end == end or (
        shape & SCRIPT_SEQUENCE and (table[chars[run_end]] & KIND == NUMBER or table[chars[run_end]] & IN_SCRIPT)
    )
    if shape & TRAILING_WHOLE and at_end:
        return run_end
    if shape & NEWLINE_ENDS_RUN and last_newline >= 0:
        return last_newline + 1
    if at_end:
        return run_end
    return run_end - 1 if run_end - i >= 2 else i + 1


@inlined
def _segment_run_end(
    chars: np.ndarray, i: int, end: int, table: np.ndarray, kind: int, script: int
) -> int:  # pragma: no cover - compiled
    """``_run_end`` within one segment of DeepSeek-V3's splits: in or out of the script's runs."""
    while i < end and table[chars[i]] & KIND == kind and table[chars[i]] & IN_SCRIPT == script:
        i += 1
    return i


@inlined
def _sequence_piece_end(
    chars: np.ndarray, i: int, end: int, table: np.ndarray, numbers: int, shape: int
) -> int:  # pragma: no cover - compiled
    """DeepSeek-V3's three splits at ``chars[i]``: numbers ``numbers`` at a time, each a
    piece; else its pattern within the segment ``chars[i]`` is in, a run of the script's
    characters or text between them and numbers (see the module docstring)."""
    entry = table[chars[i]]
    kind, script = entry & KIND, entry & IN_SCRIPT
    if kind == NUMBER:
        j = i + 1
        while j < end and table[chars[j]] & KIND == NUMBER and j - i < numbers:
            j += 1
        return j
    following = UNKNOWN  # the next character's kind within the segment
    if i + 1 < end and table[chars[i + 1]] & IN_SCRIPT == script:
        following = table[chars[i + 1]] & KIND
    if entry & ASCII_PUNCTUATION and i + 1 < end and table[chars[i + 1]] & ASCII_LETTER:
        j = i + 2
        while j < end and table[chars[j]] & ASCII_LETTER:
            j += 1
        return j
    if following == LETTER and (kind == SPACE or kind == OTHER):
        return _segment_run_end(chars, i + 2, end, table, LETTER, script)
    if kind == LETTER:
        return _segment_run_end(chars, i + 1, end, table, LETTER, script)
    if kind == OTHER:  # no alternative matches here: one piece up to where one does
        j = i + 1
        while j < end and table[chars[j]] & KIND == OTHER and table[chars[j]] & IN_SCRIPT == script:
            if j + 1 < end and table[chars[j + 1]] & KIND == LETTER and table[chars[j + 1]] & IN_SCRIPT == script:
                break
            j += 1
        return j
    j = i + 1 if chars[i] == SPACE_CHAR and following == PUNCTUATION else i
    if table[chars[j]] & KIND == PUNCTUATION:
        j = _segment_run_end(chars, j + 1, end, table, PUNCTUATION, script)
        return _segment_run_end(chars, j, end, table, NEWLINE, script)
    return _whitespace_end(chars, i, end, table, shape)


@compiled
def piece_ends(
    chars: np.ndarray, table: np.ndarray, numbers: int, shape: int
) -> np.ndarray:  # pragma: no cover - compiled
    ends = np.empty(chars.shape[0], dtype=np.int64)
    n, i = 0, 0
    while i < chars.shape[0]:
        i = piece_end(chars, i, chars.shape[0], table, numbers, shape)
        ends[n] = i
        n += 1
    return ends[:n]

r"""Each character's class for the compiled byte-level cut (``byte_level_split``), learned
from the file's own split.

A character is read through a class: letter, number, ``\r``/``\n``, other whitespace,
other, where letters split by case mark, and in DeepSeek-V3's splits punctuation and a
script's characters; with bits for the contraction letters, the cases and ASCII. The classes are not Python's: Oniguruma carries
its own Unicode tables, which differ from the ``regex`` module's and ``unicodedata``'s on
thousands of code points (characters newer than its tables). So each character's class is
asked of the file's own pattern, run by ``tokenizers`` on a few short strings, the first time
the character is met (:class:`CharClasses`); the answer is then checked by cutting strings
that put the character in every context that tells classes apart, here and by
``tokenizers``; a character whose cuts differ is sent with its text to another engine.
What a process learned is kept on disk for the next (``passed_checks.kept_file``), as passed
load checks are.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from typing import Any

import numpy as np

from beamtok._src.engines.byte_level_split import (
    ASCII_LETTER,
    ASCII_PUNCTUATION,
    BEFORE_E,
    CAPITAL,
    CODE_POINTS,
    CONTRACTS,
    DOUBLE_L,
    IN_SCRIPT,
    KIND,
    LAST_E,
    LETTER,
    LOWER,
    MARK,
    NEWLINE,
    NUMBER,
    OTHER,
    PUNCTUATION,
    ROUTED,
    SPACE,
    UNKNOWN,
    piece_ends,
)
from beamtok._src.engines.passed_checks import kept_file
from beamtok._src.engines.split_rules import LETTERS_BY_CASE, SCRIPT_SEQUENCE, SplitRule

__all__ = ["CharClasses", "classes_for"]


class CharClasses:
    """Each code point's class for one file's pattern (``table``), learned from the file's
    own split the first time the code point is met (see the module docstring). A class is
    written to ``table`` once checked, from unknown to its value, so kernels in other threads
    only ever read a checked class or none; the checks cut with a private copy (``_trial``)
    that also holds the classes being checked."""

    def __init__(self, pattern: str | tuple[str, ...], rule: SplitRule) -> None:
        """``pattern``: the file's split pattern, or the patterns of its splits in order."""
        from tokenizers import Regex, pre_tokenizers

        self.rule = rule
        self._by_case = bool(rule.shape & LETTERS_BY_CASE)
        splits = [
            pre_tokenizers.Split(Regex(one), behavior="isolated", invert=False)
            for one in ((pattern,) if isinstance(pattern, str) else pattern)
        ]
        self._split = splits[0] if len(splits) == 1 else pre_tokenizers.Sequence(splits)
        self._in_sequence = bool(rule.shape & SCRIPT_SEQUENCE)
        self.table = np.zeros(CODE_POINTS, dtype=np.uint16)
        self.table[0xD800:0xE000] = ROUTED  # lone surrogates: UTF-8 has no bytes for them
        self._trial = self.table.copy()
        self._lock = threading.RLock()  # a check learns the other characters of its strings
        self._pid = os.getpid()
        self._kept = kept_file("char-classes", repr((pattern, rule)))
        self._unsaved, self._saved_at, self._exit_hook = 0, 0.0, False
        self._load_kept()
        self.learn(np.arange(128, dtype=np.uint32))

    def _load_kept(self) -> None:
        """The classes an earlier process learned for this split, where they were kept."""
        if self._kept is None:
            return
        try:
            kept = np.load(self._kept, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return  # none yet, or one being written: learned afresh
        if kept.shape == self.table.shape and kept.dtype == self.table.dtype:
            self.table[:] = kept
            self._trial[:] = kept

    def _keep(self, learned: int, at_exit: bool = False) -> None:
        """Write the table where later processes load it, at most every few tenths of a second
        while characters keep coming, and what is left at the process's exit."""
        self._unsaved += learned
        if self._kept is None or not self._unsaved:
            return
        if not at_exit and time.monotonic() - self._saved_at < 0.25:
            if not self._exit_hook:
                atexit.register(self._keep, 0, True)
                self._exit_hook = True
            return
        partial = self._kept.with_name(f"{self._kept.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            self._kept.parent.mkdir(parents=True, exist_ok=True)
            with open(partial, "wb") as out:
                np.save(out, self.table, allow_pickle=False)
            os.replace(partial, self._kept)
        except OSError:
            return  # a directory that cannot be written keeps nothing
        self._unsaved, self._saved_at = 0, time.monotonic()

    def cut(self, text: str) -> list[str]:
        """``text`` cut here (its characters' classes learned first); ValueError where it
        holds a character sent to another engine."""
        return self._cut(text, self.table)

    def _cut(self, text: str, table: np.ndarray) -> list[str]:
        chars = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        self.learn(np.unique(chars))
        if (table[chars] & KIND == ROUTED).any():
            raise ValueError(f"{text!r} holds a character this cut does not take")
        ends = piece_ends(chars, table, self.rule.numbers, self.rule.shape)
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
            contexts = {
                c: _contexts(c, self._trial[ord(c)], self._by_case, self._in_sequence)
                for c in new
                if self._trial[ord(c)] != ROUTED
            }
            if self._differs("\n\n".join(text for texts in contexts.values() for text in texts)):
                for c, texts in contexts.items():
                    if any(self._differs(text) for text in texts):
                        self._trial[ord(c)] = ROUTED
            for c in new:
                self.table[ord(c)] = self._trial[ord(c)]
            self._keep(len(new))

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
        if self._in_sequence:
            return self._asked_in_sequence(c)
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

    def _asked_in_sequence(self, c: str) -> int:
        """``c``'s class in DeepSeek-V3's splits: whitespace, a number (three at a time), then
        whether it is one of the script's characters (a partner of its kind outside the script
        is cut from it) and its kind in the third split: punctuation or a symbol (ASCII ones
        join ASCII letters after them), a letter or mark (ASCII letters join ASCII punctuation
        before them), or another character (it joins a letter after it)."""
        pieces = self._pieces
        if pieces(f"{c} ") == [f"{c} "]:
            return SPACE
        if pieces(c * 4) == [c * 3, c]:
            return NUMBER
        if pieces(f"{c}!") == [f"{c}!"]:
            return PUNCTUATION | (ASCII_PUNCTUATION if pieces(f"{c}a") == [f"{c}a"] else 0)
        after_letter = pieces(f"a{c}")
        if after_letter == [f"a{c}"]:
            return LETTER | (ASCII_LETTER if pieces(f"!{c}") == [f"!{c}"] else 0)
        if pieces(f"{c}a") == [f"{c}a"] and after_letter == ["a", c]:
            return OTHER
        # the script's: told apart by partners of the script (a letter, a punctuation mark)
        if pieces(f"中{c}") == [f"中{c}"] and after_letter == ["a", c]:
            return LETTER | IN_SCRIPT
        if pieces(f"・{c}") == [f"・{c}"] and pieces(f"!{c}") == ["!", c]:
            return PUNCTUATION | IN_SCRIPT
        if pieces(f"{c}中") == [f"{c}中"] and pieces(f"中{c}") == ["中", c]:
            return OTHER | IN_SCRIPT
        return ROUTED

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


_SHARED: dict[tuple[str | tuple[str, ...], SplitRule], CharClasses] = {}
_SHARED_LOCK = threading.Lock()


def classes_for(pattern: str | tuple[str, ...], rule: SplitRule) -> CharClasses:
    """The process's classes for one spelling: what one file's split taught holds for every
    file that splits with the same pattern, so each character is learned once a process."""
    with _SHARED_LOCK:
        classes = _SHARED.get((pattern, rule))
        if classes is None:
            classes = _SHARED[(pattern, rule)] = CharClasses(pattern, rule)
        return classes


def _contexts(c: str, kind: int, by_case: bool, in_sequence: bool) -> tuple[str, ...]:
    """Strings that put ``c`` (of class ``kind``) after and before each class (and each case,
    where letters split by case; each segment, in DeepSeek-V3's splits): where a wrong class
    would cut otherwise. Contractions only tell letters apart, and a text's end only
    whitespace, so those strings are cut for those classes alone (the file's split runs at about
    a microsecond a character: the checks are most of what learning a character costs)."""
    texts: tuple[str, ...] = (f"a{c} {c}1{c}{c}!{c}'{c}x {c} \n{c}  {c}{c}'s{c}\n\n{c}\r{c} {c}", c * 5)
    if by_case:
        texts = (*texts, f"A{c}a {c}A a{c}A{c}Aa!!{c}!{c}{c}! Ab{c}{c}A'{c}x a'{c}/\n/{c}/", f"{c}A", f"a'{c}x")
    if in_sequence:
        texts = (
            *texts,
            f"1{c}2 {c}中 中{c}!{c}a {c}!a \x00{c} {c}\x00a{c}\x00 {c}1234{c}・{c}a・{c}中・{c}",
            f"{c}!",
            f"!{c}",
            f"{c}\x00",
        )
    if kind & KIND == LETTER:
        return (*texts, f"'{c}{c}x", f"'l{c}x", f"'v{c}x")
    if kind & KIND in (SPACE, NEWLINE):
        return (*texts, c, f"{c} ", f" {c}", f"{c}  ")
    return texts

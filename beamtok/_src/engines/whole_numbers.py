"""Numbers kept whole, for a native engine that pieces them three digits at a time.

tiktoken writes cl100k's number rule ``\\p{N}{1,3}+``: possessive to tiktoken, so a run of
digits is cut into pieces of three; but to Oniguruma, ``tokenizers``' regex engine, ``{1,3}+``
is "one or more of ``{1,3}``", so a tokenizer.json carrying that spelling (as the converter
writes it) keeps every run of numbers whole, one piece, and is not cl100k
(``split_patterns``). Such a file can still use cl100k's native engine for everything but its
long numbers:

- in both patterns a character of Unicode's N categories only ever joins other such
  characters in a piece, and a run of them starts a new piece; so a run of four or more ends a
  piece where it starts and where it ends, and nothing after the run depends on what came
  before it (the patterns look ahead, never behind);
- what comes before the run does depend on it, through the look-ahead ``\\s+(?!\\S)`` at its
  end; any number character looks the same to that look-ahead, so the text before the run is
  encoded with ``"1"`` put after it, and the last id (``"1"`` alone, a piece of its own and a
  token of its own) taken off;
- the run itself is one piece under the file's pattern: the byte-pair encoding of its bytes,
  which the file's own encoder (tiktoken with the file's pattern) gives.

The argument assumes the two patterns agree everywhere else; the engine that uses this is
still compared with ``tokenizers`` on the split sample and the probes, as every engine is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["WholeNumbers", "keeps_numbers_whole"]

SENTINEL = "1"  # stands for the number after a text: one character of category N, one token


class WholeNumbers:
    """Encodes as ``native`` does, except that runs of four or more number characters are
    one piece, encoded by ``whole`` (see the module docstring)."""

    def __init__(self, native: Callable[[str], list[int]], whole: Callable[[str], list[int]]) -> None:
        import regex

        self.native, self.whole = native, whole
        self.long_run = regex.compile(r"\p{N}{4,}")

    def encode(self, text: str) -> list[int]:
        runs = list(self.long_run.finditer(text))
        if not runs:
            return self.native(text)
        ids: list[int] = []
        start = 0
        for run in runs:
            if run.start() > start:
                ids += self.native(text[start : run.start()] + SENTINEL)[:-1]
            ids += self.whole(run.group())
            start = run.end()
        if start < len(text):
            ids += self.native(text[start:])
        return ids


def keeps_numbers_whole(reference: Any) -> bool:
    """Whether ``tokenizers`` pieces a long run of digits whole with this file, where three
    digits at a time is the rule of the native engines."""
    pre = reference.pre_tokenizer
    if pre is None:
        return False
    pieces = [piece for piece, _ in pre.pre_tokenize_str("x 1234567 x")]
    return "1234567" in pieces

"""The strings split patterns are compared on, and a pattern as two regex engines read it.

The native engines split text with patterns of their own: kitoken with a look-ahead-free form
of GPT-2's split, bpe-openai with cl100k's and o200k's. Files spell these splits in several
ways: tiktoken writes cl100k today with possessive quantifiers, a factored apostrophe and
``\\s++$|\\s*[\\r\\n]`` where the older form has ``\\s*[\\r\\n]+``; transformers'
``TikTokenConverter`` writes the older form; GPT-2's own tokenizer.json relies on the ByteLevel
pre-tokenizer's built-in regex. These spellings do not always cut the same pieces (the current
cl100k form keeps ``"\\n "`` at the end of a text whole, the older one cuts it in two), but
byte-pair encoding the pieces can still give the same ids: it does whenever no token of the
vocabulary joins the bytes across the cut. So the test is on ids: a file whose pattern is not
spelled as an engine's own is encoded by the engine only if it gives the ids ``tokenizers``
gives with the file itself on every string of this sample (and then on the probe strings, as
every engine).

The sample. These patterns look at characters only through a few classes: letters by case
(``\\p{Lu}``, ``\\p{Ll}``, ``\\p{Lt}``, ``\\p{Lm}``, ``\\p{Lo}``) and marks (``\\p{M}``),
digits and other numbers, ``'`` with the contraction letters in either case, a space, ``\\r``,
``\\n``, other whitespace, ``/`` and other punctuation. ``ALPHABET`` holds a character of every
such class; the sample is every string of up to three of them, seeded random strings of four
to twelve, and runs of one class (digits past ``{1,3}``, whitespace before a letter and at the
end). Agreement on it is evidence, not proof; it is what the tests check on whole corpora.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections.abc import Iterator

__all__ = [
    "ALPHABET",
    "CL100K_TIKTOKEN_OLDER",
    "CL100K_TODAY",
    "as_oniguruma_reads_it",
    "class_end",
    "group_end",
    "outside_classes",
    "split_sample",
]

ALPHABET = (
    "asdmtlvreSDMTLVREAé"  # contraction letters in both cases, another upper and a lower letter
    "ǅʰ中\u0301"  # title case, modifier letter, other letter, combining mark
    "1٣½"  # ASCII digit, other decimal digit, other number
    "' \t\n\r\u00a0\u3000\x0b"  # apostrophe, space, tab, newlines, other whitespace
    "!/_😀\x00"  # punctuation, the slash o200k treats apart, symbol, control
)


@functools.lru_cache(maxsize=1)
def split_sample() -> tuple[str, ...]:
    """The strings a pattern's split is compared on (see the module docstring)."""
    sample: list[str] = []
    for length in (1, 2, 3):
        sample += ["".join(chars) for chars in itertools.product(ALPHABET, repeat=length)]
    rng = random.Random(20261126)
    sample += ["".join(rng.choices(ALPHABET, k=rng.randint(4, 12))) for _ in range(20_000)]
    for run in (" ", "\n", "\t", "\r\n", " \n", "\u3000", "1", "٣", "a", "A", "'", "!"):
        for n in range(1, 9):
            sample += [run * n, run * n + "x", "x" + run * n, run * n + "'s", run * n + " x"]
    return tuple(sample)


def as_oniguruma_reads_it(pattern: str) -> str:
    """``pattern`` rewritten so that fancy-regex (tiktoken's engine) splits as Oniguruma
    (``tokenizers``' engine) splits with the original. The two read two spellings differently:

    - ``X{n,m}+``: possessive in fancy-regex, "one or more of ``X{n,m}``" in Oniguruma (so
      tiktoken's own cl100k spelling, ``\\p{N}{1,3}+``, keeps whole digit runs in
      ``tokenizers``): written ``(?:X{n,m})+``;
    - ``$``: the end of the text in fancy-regex, the end of any line in Oniguruma: written
      ``(?m:$)``.

    ValueError for a pattern this does not follow (a nested character class)."""
    return "".join(_rewritten(pattern))


def _rewritten(pattern: str) -> list[str]:
    out: list[str] = []
    atom: int | None = None  # where in ``out`` the last atom starts, while a quantifier may follow
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c in "\\[":  # an escape (``\\p{..}`` whole) or a character class: one atom, copied
            end = _escape_end(pattern, i) if c == "\\" else class_end(pattern, i)
            atom = len(out)
            out.append(pattern[i:end])
            i = end
            continue
        if c == "(":
            end = group_end(pattern, i)
            head = re.match(r"\(\?(?:[a-zA-Z-]*:|[=!]|<[=!])?", pattern[i:end])
            opening = head.group(0) if head else "("
            atom = len(out)
            out.append(opening + "".join(_rewritten(pattern[i + len(opening) : end - 1])) + ")")
            i = end
            continue
        quantifier = re.match(r"\{\d*(?:,\d*)?\}", pattern[i:]) if c == "{" else None
        if quantifier is not None:
            i += len(quantifier.group(0))
            if pattern[i : i + 1] == "+" and atom is not None:
                repeated = "".join(out[atom:])
                del out[atom:]
                out.append(f"(?:{repeated}{quantifier.group(0)})+")
                i += 1
            else:
                out.append(quantifier.group(0))
            atom = None
            continue
        if c == "$":
            out.append("(?m:$)")
            atom = None
        elif c == "|":
            out.append(c)
            atom = None
        elif c in "*+?":
            out.append(c)  # a quantifier of the last atom, or its possessive or lazy mark
        else:
            atom = len(out)
            out.append(c)
        i += 1
    return out


def _escape_end(pattern: str, start: int) -> int:
    """The index after the escape at ``start`` (a property ``\\p{...}`` whole)."""
    end = start + 2
    if pattern[start + 1 : end] in ("p", "P") and pattern[end : end + 1] == "{":
        end = pattern.index("}", end) + 1
    return end


def class_end(pattern: str, start: int) -> int:
    """The index after the character class opening at ``start`` (ValueError for a nested or
    unclosed one)."""
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        if pattern[i] == "[":
            raise ValueError(f"a nested character class at {start}")
        i += 2 if pattern[i] == "\\" else 1
    if i >= len(pattern):
        raise ValueError(f"an unclosed character class at {start}")
    return i + 1


def outside_classes(pattern: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """Each character of ``pattern`` from ``start`` that is neither escaped nor in a character
    class, with the depth of the groups it stands in (a parenthesis counts as inside its own
    group). ValueError for a nested or unclosed class."""
    depth, i = 0, start
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = class_end(pattern, i)
            continue
        depth += c == "("
        yield i, c, depth
        depth -= c == ")"
        i += 1


def group_end(pattern: str, start: int) -> int:
    """The index after the group opening at ``start``."""
    for i, c, depth in outside_classes(pattern, start):
        if c == ")" and depth == 1:
            return i + 1
    raise ValueError(f"an unclosed group at {start}")


# tiktoken's current spelling of cl100k's split (tiktoken_ext.openai_public)
CL100K_TODAY = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
# tiktoken 0.5-0.8's spelling of it (factored apostrophe, possessive prefix, no ``$`` rule)
CL100K_TIKTOKEN_OLDER = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)

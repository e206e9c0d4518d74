"""The characters kitoken's WordPiece reads otherwise than ``tokenizers``, so that texts holding
one are encoded by ``tokenizers`` itself.

kitoken encodes a BERT-style file (``BertNormalizer``, ``BertPreTokenizer``, ``WordPiece``)
in native code, faster than ``tokenizers``, and gives its ids wherever both read a character
alike. They do not always: kitoken's Unicode tables are not those of ``tokenizers``. With
``clean_text`` kitoken drops every character its tables leave unassigned (~820,000 code
points, where ``tokenizers`` gives ``[UNK]``), and about 500 characters assigned in recent
Unicode versions (marks, punctuation, format characters) are lowercased, stripped of accents
or split as punctuation by one and not the other.

The differences are per character, not per vocabulary: both cut the normalized text into
words the same way wherever they read its characters alike, and WordPiece's greedy longest
match is the same algorithm in both. One difference shows only in context: kitoken
lower-cases a capital sigma that ends a word after a letter to the final sigma (``ΟΔΥΣΣΕΥΣ``
becomes ``οδυσσευς``; Unicode's Final_Sigma rule, the one context-dependent mapping of
lower-casing, which Rust's ``str::to_lowercase`` applies), where ``tokenizers`` lower-cases
character by character (``οδυσσευσ``). So the characters are found once, by encoding every
code point alone, between two letters, between two spaces and at the end of a word after a
letter (where Final_Sigma applies), under every ``BertNormalizer`` setting (24), with a vocabulary that holds every character and every ``##`` continuation
(so no difference hides behind ``[UNK]``; a test samples code points, with a vocabulary of
what a normalizer makes of them), and kept in ``wordpiece_chars.json`` beside this
module with the kitoken and ``tokenizers`` versions that made it. Another version of either
is refused by name (``tokens`` stay exact: the cached-words engine encodes), until the table
is made again::

    python -m beamtok._src.engines.wordpiece_chars      # ~7 min on 2 cores
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import re
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from beamtok._src.base.errors import ConfigError

__all__ = ["TABLE", "CharsReadOtherwise", "differing_chars", "routed_chars"]

TABLE = Path(__file__).with_name("wordpiece_chars.json")
FORMS = ("{}", "a{}b", "x {} y", "a{}")  # alone, inside a word, a word of its own, ending a word
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
SETTINGS = [
    {
        "type": "BertNormalizer",
        "clean_text": clean,
        "handle_chinese_chars": chinese,
        "strip_accents": strip,
        "lowercase": lower,
    }
    for clean, chinese, strip, lower in itertools.product(
        (True, False), (True, False), (None, True, False), (True, False)
    )
]


def versions() -> dict[str, str]:
    return {package: metadata.version(package) for package in ("kitoken", "tokenizers")}


def code_points() -> list[int]:
    return [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def characters_for(points: Sequence[int]) -> list[int]:
    """``points`` and every character their lowercase and canonical decomposition hold (what a
    normalizer can make of them): a vocabulary of these hides no difference behind ``[UNK]``."""
    found = set(points)
    for c in points:
        lowered = chr(c).lower()
        found.update(
            ord(x) for x in lowered + unicodedata.normalize("NFD", chr(c)) + unicodedata.normalize("NFD", lowered)
        )
    return sorted(found)


def every_character_file(normalizer: dict[str, Any], points: Sequence[int]) -> str:
    """A WordPiece tokenizer.json whose vocabulary holds every character of ``points`` and
    what a normalizer makes of them, alone and as a ``##`` continuation, with ``normalizer``
    and BERT's pre-tokenizer."""
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for c in characters_for(points):
        if 0xD800 <= c < 0xE000:
            continue
        vocab.setdefault(chr(c), len(vocab))
        vocab.setdefault("##" + chr(c), len(vocab))
    added = [
        {
            "id": i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in enumerate(SPECIALS)
    ]
    model = {
        "type": "WordPiece",
        "unk_token": "[UNK]",
        "continuing_subword_prefix": "##",
        "max_input_chars_per_word": 100,
        "vocab": vocab,
    }
    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": normalizer}
    spec.update(
        {"pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": None, "decoder": None, "model": model}
    )
    return json.dumps(spec)


def differing_chars(normalizer: dict[str, Any], points: Sequence[int]) -> set[int]:
    """The code points of ``points`` that kitoken and ``tokenizers`` encode differently in any
    of ``FORMS`` under ``normalizer``."""
    from kitoken import Kitoken
    from tokenizers import Tokenizer as RustTokenizer

    spec = every_character_file(normalizer, points)
    native, reference = Kitoken.from_tokenizers(spec.encode()), RustTokenizer.from_str(spec)
    found = set()
    for form in FORMS:
        texts = [form.format(chr(c)) for c in points]
        for c, text, want in zip(points, texts, reference.encode_batch_fast(texts, add_special_tokens=False)):
            if list(native.encode(text)) != want.ids:
                found.add(c)
    return found


def as_ranges(points: Iterable[int]) -> list[list[int]]:
    ranges: list[list[int]] = []
    for c in sorted(points):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return ranges


class CharsReadOtherwise:
    """Whether a text holds a character of the table. An ASCII text holds none (the table has
    no ASCII character; ``str.isascii`` is answered from a flag the string carries); the
    others are searched with one character class of the table's characters below U+10000
    (which ``re`` compiles to a bitmap), and the characters above, where there are any, are
    looked up among the table's ranges there (a class of those would be tried range by range
    at every character)."""

    def __init__(self, ranges: Sequence[Sequence[int]]) -> None:
        if any(lo < 0x80 for lo, _ in ranges):
            raise ValueError("the table holds an ASCII character: ASCII texts could not be passed over")
        basic = [(lo, min(hi, 0xFFFF)) for lo, hi in ranges if lo <= 0xFFFF]
        self.basic = re.compile("[" + "".join(_class_range(lo, hi) for lo, hi in basic) + "]")
        astral = [(max(lo, 0x10000), hi) for lo, hi in ranges if hi > 0xFFFF]
        self.astral_starts = [lo for lo, _ in astral]
        self.astral_ends = [hi for _, hi in astral]

    def found_in(self, text: str) -> bool:
        if text.isascii():
            return False
        if self.basic.search(text) is not None:
            return True
        for char in ASTRAL.findall(text):
            c = ord(char)
            i = bisect.bisect_right(self.astral_starts, c) - 1
            if i >= 0 and c <= self.astral_ends[i]:
                return True
        return False


ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _class_range(lo: int, hi: int) -> str:
    return re.escape(chr(lo)) + ("-" + re.escape(chr(hi)) if hi > lo else "")


@functools.lru_cache(maxsize=1)
def routed_chars() -> CharsReadOtherwise:
    """The characters of the table (a text holding one is encoded by ``tokenizers``);
    ConfigError when the table was made with other kitoken or ``tokenizers`` versions than
    these."""
    table = json.loads(TABLE.read_text(encoding="utf-8"))
    if table["versions"] != versions():
        made = ", ".join(f"{k} {v}" for k, v in table["versions"].items())
        here = ", ".join(f"{k} {v}" for k, v in versions().items())
        raise ConfigError(
            f"the characters kitoken's WordPiece reads otherwise were found with {made}, not {here}: "
            "run python -m beamtok._src.engines.wordpiece_chars to find them for these versions"
        )
    return CharsReadOtherwise(table["ranges"])


def _differing_under(setting: dict[str, Any]) -> set[int]:
    return differing_chars(setting, code_points())


def main() -> None:
    """Find the characters under every setting (a process per core) and write the table."""
    from concurrent.futures import ProcessPoolExecutor

    found: set[int] = set()
    with ProcessPoolExecutor() as pool:
        for setting, chars in zip(SETTINGS, pool.map(_differing_under, SETTINGS)):
            print(f"{setting}: {len(chars)} characters", file=sys.stderr, flush=True)
            found |= chars
    table: dict[str, Any] = {
        "versions": versions(),
        "made_by": "python -m beamtok._src.engines.wordpiece_chars",
        "characters": len(found),
        "ranges": as_ranges(found),
    }
    TABLE.write_text(json.dumps(table, indent=None) + "\n", encoding="utf-8")
    print(f"{TABLE}: {len(found)} characters in {len(table['ranges'])} ranges", file=sys.stderr)


if __name__ == "__main__":
    main()

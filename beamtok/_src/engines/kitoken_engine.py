"""kitoken as an exact engine for tokenizers that split with GPT-2's pattern.

GPT-2's split (``GPT2_PATTERN``, the ByteLevel pre-tokenizer's default, shared by GPT-2,
RoBERTa, GPT-NeoX, Pythia, OPT and many byte-level BPE files) ends in ``\\s+(?!\\S)``. The
look-ahead makes fancy-regex run the whole pattern on its backtracking engine, and that is
most of tiktoken's time on these tokenizers. kitoken (BSD-2) encodes with the same rank-order
BPE as tiktoken (lowest rank first, leftmost on a tie, a piece that is a token comes out
whole) and keeps the text between matches as pieces of their own, so it can split with a
pattern that needs no look-ahead:

    '(?:[sdmt]|ll|ve|re) | [^\\S ]'(?:[sdmt]|ll|ve|re) | \\s?\\p{L}+ | \\s?\\p{N}+ | \\s?[^\\s\\p{L}\\p{N}]+

Why the pieces come out the same. Away from whitespace both patterns try the same
alternatives in the same order. Take a maximal whitespace run ``W`` of ``n`` characters:

- at the end of the text, GPT-2's ``\\s+(?!\\S)`` takes ``W`` whole; here nothing matches
  inside ``W``, so it is one gap: the same piece;
- followed by a character ``c`` (not whitespace): GPT-2 takes ``W[:-1]`` (the look-ahead
  backs off one character), then ``" " + run`` if ``W[-1]`` is a space, else ``W[-1]`` alone
  and the run from ``c``. Here no alternative matches before ``W[-1]``, so ``W[:-1]`` is one
  gap, and ``W[-1] + run`` is one match (a contraction after a whitespace other than a space
  has its own alternative, so ``\\n's`` keeps GPT-2's run ``'s``).

So the pieces differ only where GPT-2 has ``[w][run]`` and this has ``[w + run]``, ``w`` one
whitespace character other than a space. BPE of ``w + run`` equals BPE of ``w`` then BPE of
``run`` unless some token spans the boundary: a token that starts with a suffix of ``w``'s
UTF-8 bytes and goes on into a character that is not whitespace (every merge makes a token,
so checking every token covers every step). Tokenizers trained with GPT-2's split rarely have
one; GPT-2 has one (``\\x88\\xe8``: the end of U+2008 and the start of a CJK character).
Such ``w`` are found here at load and texts holding them are encoded by tiktoken instead.

What is checked before kitoken is used: the split pattern is GPT-2's; kitoken's tables, read
back from it, are exactly tiktoken's ranks (the same bytes for every id, multi-byte tokens in
the same rank order, every byte a token); at most a few whitespace characters need tiktoken.
The probe strings then run through it like every engine.
"""

from __future__ import annotations

from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.exact_encoder import MissingExtra

__all__ = ["KITOKEN_SPLIT", "WHITE_SPACE", "KitokenEngine", "kitoken_engine", "straddling_whitespace"]

# GPT-2's split without its look-ahead (see the module docstring for why the pieces agree)
KITOKEN_SPLIT = r"'(?:[sdmt]|ll|ve|re)|[^\S ]'(?:[sdmt]|ll|ve|re)|\s?\p{L}+|\s?\p{N}+|\s?[^\s\p{L}\p{N}]+"

# Unicode's White_Space property: what ``\s`` matches in the regex crate both engines use
# (Python's str.isspace also takes U+001C..U+001F, which ``\s`` does not)
WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B)) + "\u2028\u2029\u202f\u205f\u3000"
)

# More characters than this needing tiktoken and a per-text check would cost more than kitoken saves
MAX_ROUTED = 8


def _may_start_non_space(rest: bytes) -> bool:
    """Whether ``rest`` can be the start of the bytes of a character that is not whitespace."""
    for width in range(1, 5):
        try:
            first = rest[:width].decode("utf-8")
        except UnicodeDecodeError as e:
            if width >= len(rest):
                return e.reason == "unexpected end of data"  # a cut multi-byte character: could be any
            continue
        return first[0] not in WHITE_SPACE
    return False  # starts inside a character: no character of the run begins here


def straddling_whitespace(ranks: dict[bytes, int]) -> set[str]:
    """The whitespace characters ``w`` (not a space) for which some token joins the end of
    ``w``'s bytes to the start of a character that is not whitespace."""
    by_first_byte: dict[int, list[bytes]] = {}
    for token in ranks:
        if len(token) > 1:
            by_first_byte.setdefault(token[0], []).append(token)
    found: set[str] = set()
    for w in sorted(WHITE_SPACE - {" "}):
        encoded = w.encode()
        for suffix in (encoded[k:] for k in range(len(encoded))):
            if any(
                len(token) > len(suffix) and token.startswith(suffix) and _may_start_non_space(token[len(suffix) :])
                for token in by_first_byte.get(suffix[0], ())
            ):
                found.add(w)
                break
    return found


class KitokenEngine:
    """kitoken set up to encode exactly as tiktoken does with GPT-2's pattern; texts holding
    one of :attr:`routed` must be encoded by tiktoken."""

    def __init__(self, encoder: Any, routed: frozenset[str]) -> None:
        self.encoder = encoder
        self.routed = routed

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.encoder.encode(text)
        return ids


def kitoken_engine(tokenizer_json: str, ranks: dict[bytes, int]) -> KitokenEngine:
    """A :class:`KitokenEngine` for this tokenizer where every check in the module docstring
    holds (the caller has checked the split).

    Args:
        tokenizer_json: The file's ``tokenizer.json`` text.
        ranks: The file's ranks, as tiktoken reads them.

    Raises:
        MissingExtra: kitoken is not installed.
        ConfigError: A check fails (the reason named).
    """
    try:
        from kitoken import Kitoken
    except ImportError:
        raise MissingExtra("kitoken is not installed: pip install kitoken", install="kitoken") from None
    without = [b for b in range(256) if bytes([b]) not in ranks]
    if without:
        raise ConfigError(f"byte {without[0]:#04x} has no token of its own, which kitoken needs")
    routed = straddling_whitespace(ranks)
    if len(routed) > MAX_ROUTED:
        raise ConfigError(
            f"tokens join {len(routed)} whitespace characters to the text after them (more than {MAX_ROUTED} "
            "to leave to tiktoken text by text)"
        )
    try:
        encoder = Kitoken.from_tokenizers(tokenizer_json.encode())
        config = encoder.config()
        config["split"] = [{"Pattern": {"pattern": {"Regex": KITOKEN_SPLIT}, "behavior": "Isolate"}}]
        config["normalization"], config["processing"] = [], []
        config["fallback"] = []  # a byte without a token raises (never skipped)
        encoder.set_config(config)
        model = encoder.definition()["model"]["BytePair"]["vocab"]
    except Exception as e:  # kitoken raises its own error types, which differ between versions
        raise ConfigError(f"kitoken cannot set this file up: {type(e).__name__}: {e}") from None
    if not _same_ranks(model, ranks):
        raise ConfigError("kitoken reads the vocabulary into other ranks than the file's")
    return KitokenEngine(encoder, frozenset(routed))


def _same_ranks(model: list[dict[str, Any]], ranks: dict[bytes, int]) -> bool:
    """kitoken's vocabulary, in its rank order, against tiktoken's ranks: the same token for
    every id, and merged (multi-byte) tokens in increasing id order. Single bytes are never
    made by a merge, so where kitoken ranks them does not matter."""
    if len(model) != len(ranks):
        return False
    previous = -1
    for entry in model:
        token, id_ = bytes(entry["bytes"]), entry["id"]
        if ranks.get(token) != id_:
            return False
        if len(token) > 1:
            if id_ <= previous:
                return False
            previous = id_
    return True

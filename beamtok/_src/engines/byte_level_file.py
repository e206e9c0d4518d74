"""A byte-level BPE file read for the rank-order engines (tiktoken, kitoken, bpe-openai):
checked for what they can reproduce exactly, with its ranks and tiktoken's encoding of them,
made once for every candidate :func:`~beamtok._src.engines.engine_choice.choose` tries.

Exact only when the file is plain byte-level BPE: no normalizer but NFC (applied before
encoding, as ``tokenizers`` makes it: ``normal_forms``), a split pattern (the ByteLevel
pre-tokenizer's own GPT-2 split, or a ``Split`` regex followed by ByteLevel without its own
split), no prefix space, a BPE model whose merges the rank order reproduces (below), no byte
fallback, added tokens without strip options, and a post-processor that adds fixed tokens
around a single text or none (the ids it adds are put around the engine's, as ``tokenizers``
does with ``add_special_tokens``). Anything else is refused, never approximated; what passes
must then encode the hard strings of :data:`PROBES` exactly as ``tokenizers`` does.

When the two merge orders agree. Both engines start from the bytes of a piece and merge one
adjacent pair at a time. tiktoken merges the pair whose concatenation is the token of lowest
id (a pair is a candidate whenever its concatenation is a token), the leftmost on a tie, and
returns a piece that is itself a token whole. ``tokenizers`` merges the listed pair (a
candidate only if listed) that comes first in the merges list. So they agree when:

1. every merge makes a token (``left + right`` is in the vocabulary) and the merges come in
   the order of the ids they make (never decreasing): then "first in the list" picks a pair
   making the lowest id, as tiktoken does;
2. a pair is listed whenever its concatenation is a token, so both have the same candidates.
   Files with one merge per token in id order (GPT-2's, the ones ``ranks.py`` writes) list the
   merge of each token's own history; files with several merges per token (written by
   transformers' ``TikTokenConverter``: Llama-3, GPT-4-class) list every split of a token into
   two tokens, which is checked here;
3. a piece that is a token comes out whole: ``ignore_merges`` on (``TikTokenConverter`` sets
   it); required where several merges make one token.

What remains is a tie: two candidate pairs making the same token at once. Disjoint ones are
merged in either order with the same result; overlapping ones (``a + b == b + c`` around a
shared middle token) go leftmost in tiktoken and by list order in ``tokenizers``, which can
put the right one first. Whether such a state is ever reached depends on the ranks, so it is
what the probe strings (runs of one character, repeated pairs) and the tests (every shipped
document, hypothesis text, tokenizer.json files written by ``TikTokenConverter`` for cl100k,
o200k and Qwen ranks) exercise; a file that ever encodes differently on them is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.exact_encoder import MissingExtra, added_around
from beamtok._src.engines.ranks import missing_byte_token
from beamtok._src.engines.split_patterns import as_oniguruma_reads_it
from beamtok._src.engines.tokenizer_parts import TokenizerFile

__all__ = [
    "GPT2_PATTERN",
    "PROBES",
    "ByteLevelFile",
    "byte_level_file",
    "check_byte_level",
    "shared_byte_level_file",
    "split_pattern",
    "split_sequence",
    "takes_nfc",
]

# GPT-2's pre-tokenization split, as the ByteLevel pre-tokenizer applies it.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


SAMPLE_CHUNK = 4096  # split-sample strings compared per batch

# Strings where byte-level BPE engines tend to part ways; each must encode identically.
PROBES = (
    "",
    " ",
    "  ",
    "\t\t x",
    "a  b   c    d",
    "trailing   ",
    "\n\n\n",
    "\r\n\r\nx",
    " \n \n  \n",
    "line\n  indented\n\tTab",
    "1234567890 12 123 1234",
    "3.14159e-10, -42, +7, 1,000,000",
    "x²³ ½ ⅓ ٣٤٥ ໒໓",
    "中文字符和日本語のテキスト、한국어 텍스트。",
    "Ελληνικά Русский עברית العربية हिन्दी",
    "emoji 😀👍🏽 👩‍👩‍👧‍👦 🏳️‍🌈 ❤️",
    "e\u0301 a\u0308 n\u0303 ü é",
    "a\u1dc4\u0899 \u0301\u1ac1\u0334 \u0301\U00010f46\u0334",
    "\u200b\u200d\ufeff zero width",
    "ctrl \x00\x01\x1f\x7f end",
    "don't I'LL we'Ve they'RE it's",
    "CamelCaseWordsAndALLCAPS snake_case kebab-case",
    "https://example.com/a?b=c&d=e#f",
    "<|endoftext|>inside<|endoftext|> text",
    "a" * 300,
    "ab" * 200 + "!",
    "  " * 40 + "x",
    "\u00a0\u2003\u3000 odd spaces",
    "def f(x):\n    return x ** 2  # comment\n",
    "para\n\nnext\n's x\t'd y \n'll\r\n\r\n're\u3000z\u2028w \u2008語 \u2008a\x85b",
    '{"json": [1, 2, {"k": null}]}',
    # runs of one character and repeated pairs: where two overlapping pairs can make one token
    " " * 77,
    "=" * 61,
    "*" * 33,
    "/" * 29,
    "-" * 71,
    "\t" * 17,
    "\n" * 23,
    "0" * 41,
    "atatatatatat",
    "erererererer",
    "enccnce",
)


@dataclass(frozen=True)
class ByteLevelFile:
    """A byte-level BPE file as the rank-order engines read it.

    Attributes:
        pattern: Its split pattern, as Oniguruma (tiktoken's regex engine) reads it.
        nfc: Whether texts are NFC-normalized first.
        prefix: The ids the post-processor puts before a single text.
        suffix: The ids it puts after one.
        special: Each added token's text and id (cut out of a text before BPE).
        ranks: Each ordinary token's bytes and rank (its id).
        encoding: tiktoken's encoding of these ranks: it encodes what a native engine leaves.
    """

    pattern: str
    nfc: bool
    prefix: list[int]
    suffix: list[int]
    special: dict[str, int]
    ranks: dict[bytes, int]
    encoding: Any


def byte_level_file(spec: dict[str, Any], name: str) -> ByteLevelFile:
    """Check a byte-level file and read its ranks into tiktoken.

    Args:
        spec: The ``tokenizer.json`` parsed (only read).
        name: The tokenizer's name, for messages.

    Returns:
        The file as the rank-order engines read it.

    Raises:
        MissingExtra: tiktoken is not installed.
        ConfigError: The file is not one the rank-order engines reproduce (the reason named).
    """
    try:
        import tiktoken
    except ImportError as e:
        raise MissingExtra(
            "the rank-order engines need the tiktoken package: pip install tiktoken", install="tiktoken"
        ) from e
    pattern, nfc = check_byte_level(spec, name)
    try:
        pattern = as_oniguruma_reads_it(pattern)  # tiktoken's regex engine reads two spellings otherwise
    except ValueError as e:
        raise ConfigError(f"tokenizer {name!r}: its split pattern has {e}, which beamtok does not translate") from None
    prefix, suffix = added_around(spec, name)
    to_bytes = _byte_level_table()
    special = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}  # cut out before BPE, by both libraries
    ranks: dict[bytes, int] = {}
    for token, rank in spec["model"]["vocab"].items():
        if token in special:
            continue
        try:
            ranks[token.translate(to_bytes).encode("latin-1")] = rank
        except UnicodeEncodeError as e:
            raise ConfigError(f"tokenizer {name!r}: vocab entry {token!r} is not byte-level") from e
    try:
        encoding = tiktoken.Encoding(
            name=f"beamtok:{name}", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special
        )
    except ValueError as e:
        raise ConfigError(f"tokenizer {name!r}: tiktoken refuses it ({e})") from e
    return ByteLevelFile(pattern, nfc, prefix, suffix, special, ranks, encoding)


def shared_byte_level_file(file: TokenizerFile) -> ByteLevelFile:
    """:func:`byte_level_file` of ``file``, made once for all the candidates that read it (a
    refusal is raised again, the same, for each).

    Args:
        file: The tokenizer file ``choose`` is choosing an engine for.
    """
    made = file.derived.get("byte level")
    if made is None:
        try:
            made = byte_level_file(file.spec, file.name)
        except ConfigError as e:
            made = e
        file.derived["byte level"] = made
    if isinstance(made, ConfigError):
        raise made
    return made


def check_byte_level(spec: dict[str, Any], name: str) -> tuple[str, bool]:
    """The split pattern and whether NFC comes first, or ConfigError naming what is not exact."""

    def refuse(why: str) -> ConfigError:
        return ConfigError(f"tokenizer {name!r}: {why}")

    nfc = takes_nfc(spec, refuse)
    pattern = split_pattern(spec.get("pre_tokenizer") or {}, refuse)
    model = spec["model"]
    if model.get("type") != "BPE" or model.get("dropout") or model.get("unk_token") or model.get("byte_fallback"):
        raise refuse("its model is not plain byte-level BPE (dropout, unk token or byte fallback)")
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise refuse("its BPE model uses subword affixes")
    missing = missing_byte_token(model.get("vocab") or {})
    if missing:  # tiktoken would panic on such a byte
        raise refuse(missing)
    for added in spec.get("added_tokens", []):
        if added.get("lstrip") or added.get("rstrip") or added.get("single_word") or added.get("normalized"):
            raise refuse(f"added token {added['content']!r} has matching options tiktoken does not have")
    _check_merges(model, refuse)
    return pattern, nfc


def _byte_level_table() -> dict[int, str]:
    """A ``str.translate`` table taking a byte-level token's characters to the characters
    whose Latin-1 code is the byte each stands for; any other character is sent to U+FFFF,
    which Latin-1 cannot encode (so a token that is not byte-level raises)."""
    table: dict[int, str] = {c: "\uffff" for c in range(0x144)}
    table.update({ord(ch): chr(b) for ch, b in _byte_decoder().items()})
    return table


def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's byte-to-printable-character table."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def _check_merges(model: dict[str, Any], refuse: Any) -> None:
    """Refuse a merges list tiktoken's rank order cannot reproduce (see the module docstring)."""
    vocab = model["vocab"]
    pairs = [
        (merge[0], merge[1]) if isinstance(merge, list) else tuple(merge.split(" ", 1)) for merge in model["merges"]
    ]
    made = [vocab.get(left + right) for left, right in pairs]
    unknown = made.index(None) if None in made else len(made)
    ranks = np.array(made[:unknown], dtype=np.int64)
    steps = np.diff(ranks)
    falls = np.flatnonzero(steps < 0)
    if len(falls):
        number = int(falls[0]) + 1
        raise refuse(
            f"its merges are not in the order of the tokens they make (merge {number} makes id {made[number]} after id {made[number - 1]}); "
            "tiktoken ranks merges by the id of the token they make"
        )
    if unknown < len(made):
        left, right = pairs[unknown]
        raise refuse(f"merge {unknown} ({left!r} + {right!r}) makes a token that is not in its vocabulary")
    if not (steps == 0).any():
        return  # one merge per token, in id order: the form beamtok._src.engines.ranks writes
    if not model.get("ignore_merges"):
        raise refuse(
            "its merges list several merges per token but ignore_merges is off: a word that is itself a token could be "
            "split, which tiktoken never does"
        )
    # tiktoken merges any two tokens that make a token: every such split must be listed. A token
    # with as many listed (distinct) splits as it has cuts has them all; only the others are cut.
    listed = set(pairs)
    distinct = (
        ranks
        if len(listed) == len(pairs)
        else np.array([vocab[left + right] for left, right in listed], dtype=np.int64)
    )
    splits_listed = np.bincount(distinct, minlength=max(vocab.values(), default=0) + 1)
    tokens = list(vocab)
    cuts = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens)) - 1
    listed_of = splits_listed[np.fromiter(vocab.values(), dtype=np.int64, count=len(tokens))]
    for i in np.flatnonzero(listed_of < cuts).tolist():  # in the vocabulary's order, as the first refusal names
        token = tokens[i]
        for cut in range(1, len(token)):
            left = token[:cut]
            if left in vocab:
                right = token[cut:]
                if right in vocab and (left, right) not in listed:
                    raise refuse(
                        f"its merges list several merges per token but not {left!r} + {right!r} (which makes {token!r}); "
                        "tiktoken would merge them"
                    )


def takes_nfc(spec: dict[str, Any], refuse: Any) -> bool:
    """Whether a byte-level file normalizes to NFC (True) or not at all (False); ``refuse(why)``
    raised for any other normalizer, which cannot be applied exactly."""
    normalizer = spec.get("normalizer")
    while (
        normalizer is not None
        and normalizer.get("type") == "Sequence"
        and len(normalizer.get("normalizers") or []) <= 1
    ):
        normalizer = (normalizer.get("normalizers") or [None])[
            0
        ]  # DeepSeek-V3's file holds an empty Sequence: no normalizer
    if normalizer is not None and normalizer.get("type") != "NFC":
        raise refuse(f"its normalizer is {normalizer.get('type')} (only NFC can be applied exactly)")
    return normalizer is not None


def split_pattern(pre: dict[str, Any], refuse: Any) -> str:
    """The one regex a byte-level pre-tokenizer splits with (:func:`split_sequence`); a
    sequence of several splits is refused, as the rank-order engines take one."""
    patterns = split_sequence(pre, refuse)
    if len(patterns) != 1:
        raise refuse(f"its pre-tokenizer is {pre.get('type')}, not a regex split followed by ByteLevel")
    return patterns[0]


def split_sequence(pre: dict[str, Any], refuse: Any) -> tuple[str, ...]:
    """The regexes a byte-level pre-tokenizer splits with, one after another: GPT-2's for a
    ByteLevel with its own split, or those of isolating Split steps (one, or DeepSeek-V3's
    three) followed by a ByteLevel that does not split again."""
    if pre.get("type") == "ByteLevel":
        if not pre.get("use_regex", True) or pre.get("add_prefix_space"):
            raise refuse("its ByteLevel pre-tokenizer adds a prefix space or does not split")
        return (GPT2_PATTERN,)
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else []
    *splits, level = steps or [{}]
    if not splits or level.get("type") != "ByteLevel" or any(split.get("type") != "Split" for split in splits):
        raise refuse(f"its pre-tokenizer is {pre.get('type')}, not a regex split followed by ByteLevel")
    patterns = []
    for split in splits:
        regex = (split.get("pattern") or {}).get("Regex")
        if regex is None or split.get("behavior") != "Isolated" or split.get("invert"):
            raise refuse("its Split step is not an isolating regex split")
        patterns.append(str(regex))
    if level.get("use_regex") or level.get("add_prefix_space"):
        raise refuse("its ByteLevel step splits again or adds a prefix space")
    return tuple(patterns)

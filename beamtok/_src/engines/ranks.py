"""A Hugging Face ``tokenizer.json`` from tiktoken-style ranks (byte-level BPE).

Some tokenizers ship only as ranks (``token bytes -> rank``, e.g. ``cl100k_base``). To run them
through Hugging Face ``tokenizers`` (and to compare both engines on the same tokenizer), the
BPE merges are recovered from the ranks: a token of rank ``r`` is what byte-pair encoding its
own bytes with the tokens ranked below ``r`` leaves as exactly two parts, and those two parts
are its merge. Token strings use GPT-2's byte-to-character table, as the ByteLevel
pre-tokenizer expects; the split pattern becomes a ``Split`` pre-tokenizer before it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from beamtok._src.base.errors import ConfigError

__all__ = [
    "CL100K_PATTERN",
    "DEEPSEEK_V3_SPLITS",
    "O200K_PATTERN",
    "QWEN2_PATTERN",
    "SPECIAL_TOKENS",
    "SPLIT_PATTERNS",
    "byte_encoder",
    "merges_from_ranks",
    "read_tiktoken_ranks",
    "tokenizer_json_from_ranks",
]

# cl100k_base's split, in the form without possessive quantifiers that both regex engines
# (fancy-regex in tiktoken, Oniguruma in tokenizers) read the same way.
CL100K_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# Qwen (and Qwen2's tokenizer.json): cl100k's split with one digit per piece
QWEN2_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
# DeepSeek-V3's tokenizer.json splits three times, each an isolating Split, before a ByteLevel
# that does not split (the kana ranges and \r, \n are characters in its patterns, as here)
DEEPSEEK_V3_SPLITS = (
    r"\p{N}{1,3}",
    "[一-龥\u3040-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
)
SPLIT_PATTERNS = {"cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN, "qwen2": QWEN2_PATTERN}
"""Each published byte-level vocabulary's split, by the name its ranks are published under."""
# the special tokens each vocabulary is published with (tiktoken's, Qwen's tokenizer.json), by id
SPECIAL_TOKENS = {
    "cl100k": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    "qwen2": {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645},
}


def byte_encoder() -> dict[int, str]:
    """GPT-2's table: each byte as a printable character (bytes that print stand for
    themselves, the others are moved to code points from 256 on)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def missing_byte_token(vocab: Mapping[str, int]) -> str | None:
    """Why a byte-level vocabulary cannot encode every text (a byte without its token, which
    ``tokenizers`` drops), or None where it holds all 256."""
    to_char = byte_encoder()
    missing = [b for b in range(256) if to_char[b] not in vocab]
    return f"its vocabulary lacks the byte-level token of byte {missing[0]:#04x}" if missing else None


def merges_from_ranks(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merges, in rank order, that rebuild every multi-byte token from its bytes."""
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best: tuple[int, int] | None = None
            for i in range(len(parts) - 1):
                found = ranks.get(parts[i] + parts[i + 1])
                if found is not None and found < rank and (best is None or found < best[0]):
                    best = (found, i)
            if best is None:
                break
            i = best[1]
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) != 2 or ranks.get(parts[0], rank) >= rank or ranks.get(parts[1], rank) >= rank:
            raise ConfigError(
                f"rank {rank} ({token!r}) is not the merge of two lower-ranked tokens: not a BPE vocabulary"
            )
        merges.append((parts[0], parts[1]))
    return merges


def read_tiktoken_ranks(path: str) -> dict[bytes, int]:
    """Ranks from a tiktoken BPE file (``<base64 token> <rank>`` per line: ``*.tiktoken``,
    Llama-3's ``tokenizer.model``)."""
    import base64

    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
            except ValueError as e:
                raise ConfigError(f"{path}: line {number}: not a tiktoken rank line ({e})") from e
    return ranks


def tokenizer_json_from_ranks(
    ranks: Mapping[bytes, int], pattern: str, special_tokens: Mapping[str, int], *, normalizer: str | None = None
) -> str:
    """A ``tokenizer.json`` encoding exactly like tiktoken with these ranks and this pattern
    (after Unicode normalization ``normalizer``, e.g. ``"NFC"`` as Qwen2's, if given)."""
    encode = byte_encoder()

    def text(token: bytes) -> str:
        return "".join(encode[b] for b in token)

    vocab = {text(token): rank for token, rank in ranks.items()}
    vocab.update(special_tokens)  # in the model's vocabulary too, or tokenizers renumbers them
    merges = [[text(left), text(right)] for left, right in merges_from_ranks(ranks)]
    added = [
        {
            "id": i,
            "content": content,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for content, i in sorted(special_tokens.items(), key=lambda item: item[1])
    ]
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": normalizer} if normalizer else None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }
    return json.dumps(spec, ensure_ascii=False)

"""An exact tiktoken encoder for byte-level BPE tokenizers (GPT-2 and its kind).

tiktoken encodes several times faster than the Rust ``tokenizers`` library. It is exact for a
Hugging Face tokenizer only when that tokenizer is plain byte-level BPE: no normalizer, the
ByteLevel pre-tokenizer with GPT-2's split pattern and no prefix space, a BPE model whose
merge order is its id order (tiktoken ranks merges by id), no special tokens added around the
text, and added tokens without strip options. Anything else is refused, never approximated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from beamtok.errors import ConfigError

__all__ = ["GPT2_PATTERN", "TiktokenEncoder"]

# GPT-2's pre-tokenization split, as the ByteLevel pre-tokenizer applies it.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's byte-to-printable-character table."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


class TiktokenEncoder:
    """Encodes exactly like the given HF tokenizer (``encode_batch_fast``), through tiktoken."""

    def __init__(self, tokenizer_json: str, name: str) -> None:
        try:
            import tiktoken
        except ImportError as e:
            raise ConfigError("backend='tiktoken' needs the tiktoken package: pip install tiktoken") from e
        spec = json.loads(tokenizer_json)
        self._check(spec, name)
        decode = _byte_decoder()
        # added tokens are split out of the text before BPE, by both libraries
        special = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
        ranks: dict[bytes, int] = {}
        for token, rank in spec["model"]["vocab"].items():
            if token in special:
                continue
            try:
                ranks[bytes(decode[ch] for ch in token)] = rank
            except KeyError as e:
                raise ConfigError(f"tokenizer {name!r}: vocab entry {token!r} is not byte-level; tiktoken cannot reproduce it") from e
        self.encoding = tiktoken.Encoding(name=f"beamtok:{name}", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=special)

    @staticmethod
    def _check(spec: dict[str, Any], name: str) -> None:
        def refuse(why: str) -> ConfigError:
            return ConfigError(f"tokenizer {name!r} cannot use backend='tiktoken' exactly: {why}")

        if spec.get("normalizer") is not None:
            raise refuse("it has a normalizer")
        pre = spec.get("pre_tokenizer") or {}
        if not (pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space")):
            raise refuse(f"its pre-tokenizer is {pre.get('type')}, not GPT-2's ByteLevel split without prefix space")
        model = spec["model"]
        if model.get("type") != "BPE" or model.get("dropout") or model.get("unk_token") or model.get("byte_fallback"):
            raise refuse("its model is not plain BPE")
        if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix") or model.get("ignore_merges"):
            raise refuse("its BPE model uses affixes or ignore_merges")
        post = spec.get("post_processor") or {}
        if post.get("type") not in (None, "ByteLevel", "TemplateProcessing") or post.get("special_tokens"):
            raise refuse("its post-processor adds tokens around the text")
        if post.get("type") == "TemplateProcessing" and post.get("single") != [{"Sequence": {"id": "A", "type_id": 0}}]:
            raise refuse("its post-processor template adds tokens around the text")
        for added in spec.get("added_tokens", []):
            if added.get("lstrip") or added.get("rstrip") or added.get("single_word") or added.get("normalized"):
                raise refuse(f"added token {added['content']!r} has matching options tiktoken does not have")
        vocab = model["vocab"]
        previous = -1
        for merge in model["merges"]:
            left, right = merge if isinstance(merge, list) else merge.split(" ", 1)
            rank = vocab.get(left + right)
            if rank is None or rank <= previous:
                raise refuse("its merge order is not its id order")
            previous = rank

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        # one thread, like one Rust tokenizer per core: parallelism comes from worker processes
        encoded = self.encoding.encode_batch(list(texts), num_threads=1, allowed_special="all", disallowed_special=())
        return [np.asarray(ids, dtype=np.int32) for ids in encoded]

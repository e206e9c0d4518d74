"""An exact engine for byte-level BPE files without merges: one token a UTF-8 byte.

A byte-level BPE whose merges list is empty never joins two bytes, so where its split puts
the boundaries cannot matter: a text's ids are its UTF-8 bytes, each looked up in a table of
256 ids. Byte-level language models are trained on such files, and ``beamtok.testing``'s
``tiny_tokenizer`` is one; the BPE engines run their whole merge loop to find the same ids
(dozens of times the cost of the lookup).

What it takes: no normalizer or NFC (applied as ``tokenizers`` makes it), a ByteLevel
pre-tokenizer without a prefix space (alone, or after ``Split`` steps that keep every
character), a BPE model without merges, dropout or affixes whose vocabulary holds all 256 byte
tokens (and, where the model takes a word found whole in its vocabulary, no token longer than
one byte), added tokens without matching options (texts holding one are cut at them:
``added_segments``), and a post-processor that puts fixed tokens around a text. At load it must
give ``tokenizers``' ids on the probe strings, or it is refused with the string that differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import unencodable
from beamtok._src.engines.added_token_routing import AddedTokenRouting, refuse_unrouted_added_tokens
from beamtok._src.engines.byte_level_file import PROBES, takes_nfc
from beamtok._src.engines.exact_encoder import ExactEncoder, OtherForm, added_around
from beamtok._src.engines.normal_forms import ExactNormalForm
from beamtok._src.engines.ranks import byte_encoder, missing_byte_token
from beamtok._src.engines.tokenizer_parts import read_spec, steps_of

__all__ = ["ByteTableEncoder"]

# Split behaviours that keep every character of the text (``Removed`` drops what it matches).
KEEPING_SPLITS = ("Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")


class ByteTableEncoder:
    """Encodes exactly like the given merge-less byte-level BPE file: each UTF-8 byte of a
    text becomes the file's token for it (see the module docstring)."""

    engine_name = "beamtok byte table (byte-level BPE without merges)"
    native_refusal = ""

    def __init__(
        self, tokenizer_json: str, name: str, reference: Any = None, spec: dict[str, Any] | None = None
    ) -> None:
        """``reference``: the ``tokenizers.Tokenizer`` of ``tokenizer_json`` where the caller
        holds one; ``spec``: the text parsed, where the caller has parsed it (only read).
        OtherForm for a file with merges (the other byte-level engines' files);
        ConfigError where the engine cannot be exact for a merge-less file."""

        def refuse(why: str) -> ConfigError:
            return ConfigError(f"tokenizer {name!r} cannot use the exact fast path (byte table): {why}")

        spec = read_spec(tokenizer_json) if spec is None else spec
        model = spec.get("model") or {}
        if model.get("type") != "BPE" or model.get("merges"):
            raise OtherForm(str(refuse("its BPE has merges (this engine takes byte-level files without any)")))
        nfc = takes_nfc(spec, refuse)
        _check_pre_tokenizer(spec, refuse)
        self.table = _byte_ids(model, refuse)
        refuse_unrouted_added_tokens(spec, refuse)
        self.prefix, self.suffix = added_around(spec, name)
        self.routing: AddedTokenRouting | None = AddedTokenRouting(spec, tokenizer_json, name, reference)
        self.reference = self.routing.reference
        self.normal_form = ExactNormalForm("NFC") if nfc else None
        whole = ExactEncoder(self)
        whole.check_segments(name)
        whole.probe(name, PROBES)

    def encode_plain(self, texts: list[str]) -> list[np.ndarray]:
        """Texts holding no added token: each UTF-8 byte through the table."""
        normal_form, table = self.normal_form, self.table
        out: list[np.ndarray] = []
        for text in texts:
            if normal_form is not None:
                text = normal_form(text)
            try:
                raw = text.encode("utf-8")
            except UnicodeEncodeError:  # tokenizers cannot take it either (the pipelines refuse it earlier)
                raise ValueError(f"{self.engine_name}: {unencodable(text)}") from None
            out.append(table[np.frombuffer(raw, dtype=np.uint8)])
        return out

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError(f"a {type(self).__name__} is rebuilt, not pickled (Tokenizer drops it when pickled)")


def _check_pre_tokenizer(spec: dict[str, Any], refuse: Any) -> None:
    """Refuse a pre-tokenizer that is not ByteLevel without a prefix space, alone or after
    ``Split`` steps that keep every character (where a merge-less BPE's boundaries fall
    changes no id, but a prefix space or a dropped character does)."""
    steps = steps_of(spec, "pre_tokenizer")
    if not steps or steps[-1].get("type") != "ByteLevel":
        kind = (spec.get("pre_tokenizer") or {}).get("type")
        raise refuse(f"its pre-tokenizer is {kind}, not ByteLevel (alone or after Split steps)")
    if steps[-1].get("add_prefix_space"):
        raise refuse("its ByteLevel pre-tokenizer adds a prefix space")
    for step in steps[:-1]:
        if step.get("type") != "Split" or step.get("behavior") not in KEEPING_SPLITS:
            raise refuse(f"its pre-tokenizer step {step.get('type')} ({step.get('behavior')}) may drop characters")


def _byte_ids(model: dict[str, Any], refuse: Any) -> np.ndarray:
    """The id of each byte's token (int32, indexed by the byte); ConfigError where the model
    could give any other id for a byte."""
    if model.get("dropout") or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise refuse("its BPE has dropout or a subword prefix or suffix")
    vocab: dict[str, int] = model.get("vocab") or {}
    missing = missing_byte_token(vocab)
    if missing:
        raise refuse(missing)
    if model.get("ignore_merges") and any(len(token) > 1 for token in vocab):
        raise refuse("its BPE takes words found whole in its vocabulary, which holds tokens of several bytes")
    to_char = byte_encoder()
    return np.array([vocab[to_char[b]] for b in range(256)], dtype=np.int32)

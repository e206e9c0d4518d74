"""kitoken as an exact engine for SentencePiece-style BPE with byte fallback (Llama-2,
Mistral, Gemma's kind): native, so as fast on text it has not seen as on text it has (the
cached-words engine, ``beamtok._src.engines.cached_words``, which takes WordPiece and Unigram,
takes these files too where kitoken refuses them). Where numba is installed, such a BPE is
compiled instead (``bpe_native``), and kitoken runs it where the text cannot be cut into
words or the added tokens are whitespace nearly every text holds (Gemma 2's newlines, which
kitoken splits out natively).

kitoken reads a tokenizer.json whole (normalizer, pre-tokenizer, model) and encodes in native
code without ``tokenizers``' per-word bookkeeping. What makes it exact here is not an argument
about the split but the discipline of the byte-level path: a family is taken only where the
file's parts are ones kitoken implements (below), and then kitoken must give ``tokenizers``'
ids on the fast path's probe strings and on a slice of ``split_patterns.split_sample()``
(strings of every character class, up to three characters, and random ones), with and
without the special tokens; anything else is refused with the reason, and ``tokenizers``
encodes. Texts holding an added token (``[CLS]`` or ``<s>`` written in the text, Gemma 2's
``"\n"``) are cut at their added tokens as ``tokenizers`` cuts them (``added_segments``):
kitoken splits them out itself where its specials, made the file's added tokens longest
first, give the same cuts on the texts built from them (it does for SentencePiece-style BPE;
for WordPiece it normalizes first, ``[CLS]`` becoming ``[cls]``, and the cut is made here).
The tokens a post-processor puts around a text are put around kitoken's ids, as on the
byte-level path.

Families:

- WordPiece with ``BertNormalizer`` (any setting) and ``BertPreTokenizer`` (BERT's kind):
  kitoken's Unicode tables read some characters otherwise than ``tokenizers`` (it drops the
  ones it holds unassigned, where ``tokenizers`` gives ``[UNK]``); those characters were found
  once for all settings (``beamtok._src.engines.wordpiece_chars``) and a text holding one is
  encoded by ``tokenizers``. An ASCII text is normalized here instead, by the table of what
  the file's ``BertNormalizer`` makes of each ASCII character alone
  (``quick_normalizers.AsciiTable``: it maps character by character), and given to a second
  kitoken that has no normalization of its own (``AsciiWordPiece``): kitoken's chain of
  nine passes (replacements, NFD, accent marks, case folding) cost a third of its time on
  ASCII prose, where a ``str.translate`` does it at a few ns a character. kitoken's chain
  maps ASCII character by character too, so the two agree on every ASCII text when they
  agree on each ASCII character: each of the 128, alone and between letters, is among the
  probe strings;
- BPE with byte fallback, a ``Metaspace`` pre-tokenizer or none (or a ``Split`` that never
  cuts, Gemma's form as ``transformers`` 5 writes it: ``cutter_choice.inert_split``; then the normalizers
  ``Prepend``/``Replace`` do the SentencePiece spacing, as in Llama-2's and Mistral's files
  (not NFC or NFKC: kitoken makes those with Unicode tables of its own, which order or
  decompose some recent marks otherwise than ``tokenizers``, see ``normal_forms``),
  and ``tokenizers`` sees the whole text as one word; so it does under a Metaspace that does
  not split, Llama-2's form as ``transformers`` writes it). Then kitoken is given the file
  with a ``Split`` pre-tokenizer added (after that Metaspace, where there is one) that cuts the normalized text before each ``▁``
  following another character (``word_cutters.SpaceMarkWords``: the cut cannot change the
  result when no vocabulary piece holds another character followed by ``▁``, as none does in
  a vocabulary trained on text split at spaces, which SentencePiece does by default) and BPE
  then runs on words instead of the whole text. Where a piece does span a space, or the BPE
  takes words found whole in the vocabulary as one piece (``ignore_merges``, which would then
  apply to words instead of the text), kitoken encodes the whole text as one word, as
  ``tokenizers`` does;

Unigram is refused: kitoken's Unigram gave other ids than ``tokenizers`` on 4 of the shipped
documents for a tokenizer trained on them, so no probe set could make it safe.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.added_segments import AddedSegments
from beamtok._src.engines.added_token_routing import AddedTokenRouting, Needles, refuse_unrouted_added_tokens
from beamtok._src.engines.cutter_choice import inert_split
from beamtok._src.engines.exact_encoder import ExactEncoder, MissingExtra, added_around
from beamtok._src.engines.id_arrays import int32_ids
from beamtok._src.engines.quick_normalizers import AsciiTable
from beamtok._src.engines.split_patterns import split_sample
from beamtok._src.engines.tokenizer_parts import read_spec, steps_of
from beamtok._src.engines.word_cutters import MARK, SpaceMarkWords
from beamtok._src.engines.wordpiece_chars import routed_chars

__all__ = ["AsciiWordPiece", "KitokenEncoder", "family_of", "family_of_backend"]

SAMPLE_STRIDE = 8  # every 8th string of the split sample (~10,000) is probed at load
# each ASCII character alone, between letters and around a space: the ASCII path's probes
ASCII_PROBES = [form.format(c=chr(c)) for c in range(128) for form in ("{c}", "Ab{c}cD", "x {c}{c} Y")]


def family_of(model_type: str | None, byte_fallback: bool) -> str | None:
    """The family a tokenizer with this model (its type, as tokenizer.json names it, and
    whether a BPE falls back to bytes) belongs to here, or None where it is none of them (the
    byte-level path's checks then speak)."""
    if model_type == "BPE":
        return "SentencePiece-style BPE" if byte_fallback else None
    return model_type if model_type in ("WordPiece", "Unigram") else None


def family_of_backend(backend: Any) -> str | None:
    """:func:`family_of` for a loaded ``tokenizers.Tokenizer``, read off its model object
    (no parse of its JSON)."""
    from tokenizers import models

    model = backend.model
    if isinstance(model, models.BPE):
        return family_of("BPE", bool(model.byte_fallback))
    return family_of(type(model).__name__, False)


class AsciiWordPiece:
    """BERT's kind on an ASCII text: normalized by the file's own table, then kitoken with
    no normalization (see the module docstring)."""

    def __init__(self, encoder: Any, reference: Any) -> None:
        config = encoder.config()
        config["normalization"] = []
        encoder.set_config(config)
        self.encoder = encoder
        self.normalized = AsciiTable(reference.normalizer)
        self.specials = False  # whether kitoken splits the added tokens out itself

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.encoder.encode(self.normalized(text), self.specials)
        return ids


class KitokenEncoder:
    """Encodes exactly like the given HF tokenizer through kitoken, for the families above."""

    engine_name = "kitoken"
    native_refusal = ""

    def __init__(
        self, tokenizer_json: str, name: str, reference: Any = None, spec: dict[str, Any] | None = None
    ) -> None:
        """``reference``: the ``tokenizers.Tokenizer`` of ``tokenizer_json`` where the caller
        holds one; ``spec``: the text parsed, where the caller has parsed it (only read)."""
        from beamtok._src.engines.byte_level_file import PROBES

        spec = read_spec(tokenizer_json) if spec is None else spec
        model = spec.get("model") or {}
        self.family = family_of(model.get("type"), bool(model.get("byte_fallback")))
        self._check(spec, name)
        if self.family == "SentencePiece-style BPE" and inert_split(spec):
            spec = {**spec, "pre_tokenizer": None}  # it never cuts: kitoken is given the file as if it had none
            tokenizer_for_engine = json.dumps(spec)
        else:
            tokenizer_for_engine = tokenizer_json
        engine_json = self._cut_at_space_marks(spec) or tokenizer_for_engine
        self.cuts_words = engine_json is not tokenizer_for_engine
        try:
            from kitoken import Kitoken

            self.encoder = Kitoken.from_tokenizers(engine_json.encode())
        except ImportError as e:
            raise MissingExtra(
                "the exact fast path for this tokenizer needs the kitoken package: pip install kitoken",
                install="kitoken",
            ) from e
        except Exception as e:  # kitoken refuses a part of the file
            raise ConfigError(
                f"tokenizer {name!r} cannot use the exact fast path: kitoken cannot read it ({e})"
            ) from None
        wordpiece = self.family == "WordPiece"
        self.prefix, self.suffix = added_around(spec, name)
        self.routing: AddedTokenRouting | None = AddedTokenRouting(
            spec, tokenizer_json, name, reference, routed_too=routed_chars() if wordpiece else None
        )
        routing = self.routing
        self.reference = routing.reference
        self.whole_words = [] if wordpiece else self._whole_words_read_otherwise(spec)
        if self.whole_words:
            routing.route_whole(Needles(self.whole_words))
        self.ascii = (
            AsciiWordPiece(Kitoken.from_tokenizers(engine_json.encode()), self.reference) if wordpiece else None
        )
        self.specials = False
        self.specials_refusal = ""  # why kitoken does not split the added tokens out itself
        self._split_added_natively(spec, routing, name)
        whole = ExactEncoder(self)
        whole.check_segments(name)
        whole.probe(name, [*PROBES, *split_sample()[::SAMPLE_STRIDE], *(ASCII_PROBES if wordpiece else ())])

    def _split_added_natively(self, spec: dict[str, Any], routing: AddedTokenRouting, name: str) -> None:
        """Where texts may be cut at their added tokens (``added_segments``), let kitoken cut
        them: its specials become exactly the file's added tokens, longest first (kitoken
        takes the leftmost match, and of those starting there the first in its list: the
        longest, as ``tokenizers`` does). Kept only if the texts built from the added tokens
        then encode as ``tokenizers`` encodes them; texts holding the unknown token's text go
        to ``tokenizers`` whole (kitoken fuses two unknown ids in a row, even split out)."""
        if routing.segments is None:
            return
        encoders = [self.encoder, *([self.ascii.encoder] if self.ascii is not None else [])]
        before = [encoder.definition() for encoder in encoders]
        for encoder, definition in zip(encoders, before):
            known = {special["id"]: special for special in definition["specials"]}
            specials = [
                {
                    **known.get(t["id"], {"kind": "Control", "ident": None, "score": 0.0}),
                    "id": t["id"],
                    "bytes": list(t["content"].encode()),
                    "extract": True,
                }
                for t in spec["added_tokens"]
            ]
            encoder.set_definition(
                {**definition, "specials": sorted(specials, key=lambda special: -len(special["bytes"]))}
            )
        routed, whole = routing.routed, routing.whole
        unknown = (spec.get("model") or {}).get("unk_token")
        fused = [unknown] if isinstance(unknown, str) and unknown in routing.segments.ids else []
        routing.routed, routing.whole = Needles(fused), Needles(fused) if fused else None
        if whole is not None:
            routing.route_whole(whole)
        self.specials = True
        if self.ascii is not None:
            self.ascii.specials = True
        ExactEncoder(self).check_segments(name)
        self.specials_refusal = routing.segments_refusal
        if routing.segments_refusal:  # back to cutting in Python, checked again below
            for encoder, definition in zip(encoders, before):
                encoder.set_definition(definition)
            routing.routed, routing.whole, self.specials = routed, whole, False
            if self.ascii is not None:
                self.ascii.specials = False
            routing.segments = AddedSegments(spec["added_tokens"])
            routing.segments_refusal = ""

    def _whole_words_read_otherwise(self, spec: dict[str, Any]) -> list[str]:
        """The vocabulary tokens the file's merges do not make from their own text which
        kitoken gives whole (it takes a word found in the vocabulary as one piece, as tiktoken
        does; ``tokenizers``' BPE only merges), as the text that shows them: texts holding one
        go to ``tokenizers``. Gemma's ``<unused0>`` and ``[@BOS@]`` are such tokens."""
        added = {t["content"] for t in spec.get("added_tokens", [])}
        tokenize = self.reference.model.tokenize
        found = []
        for token in spec["model"]["vocab"]:
            if len(token) < 2 or token in added or len(tokenize(token)) == 1:
                continue
            shown = token.replace(MARK, " ").strip(" ")
            if not shown:
                continue  # a run of marks is made by merges like any other word, or split alike
            contexts = [shown, f"x {shown}", f"{shown} y", f"x {shown} y"]
            want = self.reference.encode_batch_fast(contexts, add_special_tokens=False)
            if any(list(self.encoder.encode(text)) != ids.ids for text, ids in zip(contexts, want)):
                found.append(shown)
        return found

    def _check(self, spec: dict[str, Any], name: str) -> None:
        def refuse(why: str) -> ConfigError:
            return ConfigError(f"tokenizer {name!r} cannot use the exact fast path (kitoken, {self.family}): {why}")

        if self.family is None:
            raise ConfigError(
                f"tokenizer {name!r} cannot use the exact fast path: its model is none of the families kitoken encodes here"
            )
        model = spec["model"]
        normalizer = spec.get("normalizer") or {}
        pre = spec.get("pre_tokenizer") or {}
        refuse_unrouted_added_tokens(spec, refuse)
        if self.family == "Unigram":
            raise refuse(
                "kitoken's Unigram gave other ids than tokenizers on real text (see beamtok._src.engines.kitoken_families)"
            )
        if self.family == "WordPiece":
            if normalizer.get("type") != "BertNormalizer" or pre.get("type") != "BertPreTokenizer":
                raise refuse(
                    f"its normalizer is {normalizer.get('type')} and its pre-tokenizer {pre.get('type')}, not BertNormalizer and BertPreTokenizer"
                )
            try:
                routed_chars()
            except ConfigError as e:
                raise refuse(str(e)) from None
            return
        if model.get("dropout"):
            raise refuse("its BPE model has dropout (random merges)")
        if pre and pre.get("type") != "Metaspace" and not inert_split(spec):
            raise refuse(f"its pre-tokenizer is {pre.get('type')}, not Metaspace or none (nor a Split that never cuts)")
        for step in steps_of(spec, "normalizer"):
            if step.get("type") in ("NFC", "NFKC"):  # kitoken's own Unicode tables, not tokenizers' (see normal_forms)
                raise refuse(
                    f"its normalizer has an {step['type']} step, which kitoken makes with other Unicode tables than tokenizers"
                )
            if step.get("type") not in ("Prepend", "Replace"):
                raise refuse(f"its normalizer has a {step.get('type')} step")

    def _cut_at_space_marks(self, spec: dict[str, Any]) -> str | None:
        """The file with a pre-tokenizer that cuts words as ``SpaceMarkWords`` does, for
        SentencePiece-style BPE whose whole text is one word (no pre-tokenizer, or a Metaspace
        that does not split, Llama-2's form as ``transformers`` writes it: then after it),
        where the cut cannot change the ids (see the module docstring); None where the whole
        text stays one word."""
        pre = spec.get("pre_tokenizer")
        one_word = not pre or (pre.get("type") == "Metaspace" and not pre.get("split", True))
        if (
            self.family != "SentencePiece-style BPE"
            or not one_word
            or SpaceMarkWords.why_not(spec["model"]) is not None
        ):
            return None
        split = {"type": "Split", "pattern": {"Regex": SpaceMarkWords.PATTERN}, "behavior": "Isolated", "invert": False}
        return json.dumps(
            {**spec, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [pre, split]} if pre else split}
        )

    def encode_plain(self, texts: list[str]) -> list[np.ndarray]:
        """Texts the routing leaves to kitoken (ASCII ones through the WordPiece table, where
        one is kept), each encoded alone."""
        encode, specials = self.encoder.encode, self.specials
        if self.ascii is not None:
            ascii_encode = self.ascii.encode
            return [int32_ids(ascii_encode(t) if t.isascii() else encode(t, specials)) for t in texts]
        return [int32_ids(encode(t, specials)) for t in texts]

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a KitokenEncoder is rebuilt, not pickled (Tokenizer drops it when pickled)")

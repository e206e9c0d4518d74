"""An exact fast path for byte-level BPE files that runs on the file's own split and merges,
compiled (``split_rules``, ``byte_level_split``, ``byte_level_native``; numba).

tiktoken's engines split by their own patterns: a file whose pattern no native engine of
tiktoken's takes runs on tiktoken's regex engine (cl100k as ``transformers``' converter
writes tiktoken's current spelling, whose ``\\p{N}{1,3}+`` ``tokenizers`` reads as whole
runs of numbers; a Llama 3 or Qwen2 vocabulary, which bpe-openai does not hold). This engine
takes such files when their pattern parses into a rule of the compiled cut (``split_rules``:
GPT-2's split and cl100k's in each of its spellings) and merges by the file's own merges list, as ``tokenizers`` does, so the order of the merges
need not be tiktoken's.

What it takes: no normalizer or NFC (applied as ``tokenizers`` makes it), a ``Split`` whose
pattern parses then a ByteLevel that does not split again, a BPE model without dropout, affixes
or unknown token whose vocabulary holds all 256 byte tokens, added tokens without matching
options (texts holding one are cut at them: ``added_segments``), and a post-processor that
puts fixed tokens around a text. At load it must give ``tokenizers``' ids on the probe
strings and on every string of the split sample, or it is refused with the string that
differs; a pass on the sample is remembered on the machine (``passed_checks``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import unencodable
from beamtok._src.engines.added_token_routing import AddedTokenRouting, refuse_unrouted_added_tokens
from beamtok._src.engines.byte_level_file import PROBES, split_sequence, takes_nfc
from beamtok._src.engines.exact_encoder import ExactEncoder, MissingExtra, OtherForm, ProbeMismatch, added_around
from beamtok._src.engines.id_arrays import int32_ids
from beamtok._src.engines.normal_forms import ExactNormalForm
from beamtok._src.engines.passed_checks import passed_before, remember_passed
from beamtok._src.engines.split_patterns import split_sample
from beamtok._src.engines.split_rules import SplitNotCut, split_rule_of_sequence
from beamtok._src.engines.tokenizer_parts import read_spec

__all__ = ["CompiledByteLevelEncoder"]


class CompiledByteLevelEncoder:
    """Encodes exactly like the given byte-level BPE file, cut by its own split and merged by
    its own merges in compiled code (see the module docstring)."""

    engine_name = "beamtok compiled byte-level BPE on the file's split"
    native_refusal = ""

    def __init__(
        self, tokenizer_json: str, name: str, reference: Any = None, spec: dict[str, Any] | None = None
    ) -> None:
        """``reference``: the ``tokenizers.Tokenizer`` of ``tokenizer_json`` where the caller
        holds one; ``spec``: the text parsed, where the caller has parsed it (only read).
        ConfigError where this engine cannot be exact for the file; MissingExtra
        without numba."""

        def refuse(why: str) -> ConfigError:
            return ConfigError(f"tokenizer {name!r} cannot use the exact fast path (compiled byte-level BPE): {why}")

        spec = read_spec(tokenizer_json) if spec is None else spec
        nfc = takes_nfc(spec, refuse)
        pattern = split_sequence(spec.get("pre_tokenizer") or {}, refuse)
        try:
            rule = split_rule_of_sequence(pattern)
        except SplitNotCut as e:
            raise OtherForm(str(refuse(f"its split is not one this engine cuts: {e}"))) from None
        try:
            from beamtok._src.engines.byte_level_native import NativeByteLevelBPE
            from beamtok._src.engines.byte_level_split import KIND, ROUTED
            from beamtok._src.engines.char_classes import classes_for
        except ImportError:
            missing = "numba is not installed: pip install 'beamtok[compiled]' compiles this BPE"
            raise MissingExtra(str(refuse(missing)), install="beamtok[compiled]") from None
        model = spec.get("model") or {}
        why = NativeByteLevelBPE.why_not(model)  # numba is imported only for a file it may take
        if why is None and model.get("unk_token"):
            why = "its BPE has an unknown token"
        if why is not None:
            raise refuse(why)
        refuse_unrouted_added_tokens(spec, refuse)
        self.prefix, self.suffix = added_around(spec, name)
        self.routing: AddedTokenRouting | None = AddedTokenRouting(spec, tokenizer_json, name, reference)
        self.reference = self.routing.reference
        self.normal_form = ExactNormalForm("NFC") if nfc else None
        classes = classes_for(pattern, rule)
        routed = [chr(c) for c in range(128) if classes.table[c] & KIND == ROUTED]
        if routed:  # the rule cuts ASCII otherwise than the file's split: it is not this spelling's
            raise ProbeMismatch(
                f"tokenizer {name!r} cannot use the exact fast path ({self.engine_name}): its split cuts text around "
                f"{''.join(routed)!r} otherwise than the rule for its spelling"
            )
        self.native = NativeByteLevelBPE(model, classes)
        whole = ExactEncoder(self)
        whole.check_segments(name)
        whole.probe(name, PROBES)
        # the sample is most of the set-up: checked once a machine for the same file, rule and code
        if not passed_before(self.engine_name, tokenizer_json, repr(rule)):
            differs = whole.first_difference(split_sample(), special=False)
            if differs:
                raise ProbeMismatch(
                    f"tokenizer {name!r} cannot use the exact fast path ({self.engine_name}): {differs}"
                )
            remember_passed(self.engine_name, tokenizer_json, repr(rule))

    def encode_plain(self, texts: list[str]) -> list[np.ndarray]:
        """Texts holding no added token: normalized, cut and merged; a text holding a
        character the cut does not take goes to the file."""
        normal_form = self.normal_form
        batch = texts if normal_form is None else [normal_form(text) for text in texts]
        try:
            ids = self.native.encode(batch)
        except UnicodeEncodeError:
            for text in batch:
                problem = unencodable(text)
                if problem is not None:  # tokenizers cannot take it either (the pipelines refuse it earlier)
                    raise ValueError(f"{self.engine_name}: {problem}") from None
            raise
        left = [i for i, one in enumerate(ids) if one is None]
        if left:
            by_file = self.reference.encode_batch_fast([texts[i] for i in left], add_special_tokens=False)
            for i, encoding in zip(left, by_file):
                ids[i] = int32_ids(encoding.ids)
        return [one for one in ids if one is not None]

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError(f"a {type(self).__name__} is rebuilt, not pickled (Tokenizer drops it when pickled)")

"""The rank-order engines for byte-level BPE files (GPT-2, cl100k, o200k, Llama 3, Qwen2 and
their kind): tiktoken, and the two native engines that encode ordinary text faster and leave
the rest to tiktoken, kitoken (GPT-2's split) and bpe-openai (cl100k's and o200k's own ranks).
Each is a candidate of its own in ``engine_choice``, refusing by name a file it cannot take.

All three read the file through ``byte_level_file`` (checked once for all of them). A native
engine knows no added tokens: texts holding one go to tiktoken, as do texts holding a
character kitoken must leave (``kitoken_engine``). A native engine chosen for a split spelled
otherwise than its own must first give the file's ids on ``split_patterns.split_sample()``;
every engine then encodes the probe strings (``byte_level_file.PROBES``) exactly as
``tokenizers`` does, with and without the post-processor's tokens, or is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from beamtok._src.engines.added_token_routing import AddedTokenRouting, Needles
from beamtok._src.engines.bpe_openai_engine import bpe_openai_engine
from beamtok._src.engines.byte_level_file import GPT2_PATTERN, PROBES, ByteLevelFile, byte_level_file
from beamtok._src.engines.exact_encoder import ExactEncoder, OtherForm, ProbeMismatch
from beamtok._src.engines.id_arrays import int32_ids
from beamtok._src.engines.kitoken_engine import kitoken_engine
from beamtok._src.engines.normal_forms import ExactNormalForm
from beamtok._src.engines.ranks import CL100K_PATTERN, O200K_PATTERN, QWEN2_PATTERN
from beamtok._src.engines.split_patterns import split_sample
from beamtok._src.engines.tokenizer_parts import read_spec
from beamtok._src.engines.whole_numbers import WholeNumbers, keeps_numbers_whole

__all__ = ["BpeOpenaiEncoder", "KitokenByteLevelEncoder", "RankOrderEncoder", "TiktokenEncoder"]

SAMPLE_CHUNK = 4096  # split-sample strings compared per batch
KNOWN_SPLITS = (GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN, QWEN2_PATTERN)


class RankOrderEncoder:
    """A byte-level file encoded by rank-order BPE: by a native engine where one is set
    (:meth:`_native`), texts it must leave by tiktoken; by tiktoken alone otherwise."""

    engine_name = "tiktoken"
    native_refusal = ""
    routing: AddedTokenRouting | None = None  # texts holding a special token go to tiktoken whole

    def __init__(
        self,
        tokenizer_json: str,
        name: str,
        reference: Any = None,
        spec: dict[str, Any] | None = None,
        parts: ByteLevelFile | None = None,
    ) -> None:
        """Read and check the file, set the engine up, and probe it.

        Args:
            tokenizer_json: The file's ``tokenizer.json`` text.
            name: The tokenizer's name, for messages.
            reference: The file as ``tokenizers`` loaded it (built here when None).
            spec: The text parsed, where the caller has it (only read).
            parts: The file as ``byte_level_file`` reads it, where the caller has it.
        """
        if parts is None:
            parts = byte_level_file(read_spec(tokenizer_json) if spec is None else spec, name)
        self.parts = parts
        self.prefix, self.suffix = parts.prefix, parts.suffix
        self.normal_form = ExactNormalForm("NFC") if parts.nfc else None
        self.encoding = parts.encoding
        if reference is None:
            from tokenizers import Tokenizer as RustTokenizer

            reference = RustTokenizer.from_str(tokenizer_json)
        self.reference = reference
        self.native, routed, own_spelling = self._native(tokenizer_json, reference)
        self._routed = Needles([*parts.special, *routed])  # texts tiktoken encodes
        if self.native is not None and not own_spelling:
            differs = self._differs_on_sample(reference)
            if differs:
                raise OtherForm(f"{self.engine_name} splits {differs!r} otherwise than the file's pattern")
        self._probe(name, reference)

    def _native(self, tokenizer_json: str, reference: Any) -> tuple[Any, frozenset[str], bool]:
        """The native engine (None: tiktoken alone), the characters whose texts it leaves to
        tiktoken, and whether the file spells the engine's split as the engine does."""
        return None, frozenset(), True

    def _differs_on_sample(self, reference: Any) -> str:
        """The first split-sample text the native engine encodes otherwise than ``tokenizers``
        ("" where none)."""
        texts = [text for text in split_sample() if not self._routed.found_in(text)]
        for start in range(0, len(texts), SAMPLE_CHUNK):  # in chunks: an engine that differs stops early
            chunk = texts[start : start + SAMPLE_CHUNK]
            want = reference.encode_batch_fast(chunk, add_special_tokens=False)
            for text, a, b in zip(chunk, want, self.encode_plain(chunk)):
                if a.ids != b.tolist():
                    return text
        return ""

    def _probe(self, name: str, reference: Any) -> None:
        """Refuse unless the hard strings encode exactly as ``tokenizers`` does, with the
        post-processor's tokens and without."""
        for special in (True, False):
            # one text at a time, as the engines compared with it encode
            want = [reference.encode(text, add_special_tokens=special).ids for text in PROBES]
            got = [ids.tolist() for ids in ExactEncoder(self).encode_batch(PROBES, add_special_tokens=special)]
            for text, a, b in zip(PROBES, want, got):
                if a != b:
                    raise ProbeMismatch(
                        f"tokenizer {name!r} on {self.engine_name}: {text[:40]!r} encodes as {b[:8]}... "
                        f"instead of {a[:8]}... (tokenizers, add_special_tokens={special})"
                    )

    def encode_plain(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's ids, special tokens written in it included (tiktoken encodes those)."""
        # one thread, like one Rust tokenizer per core: parallelism comes from worker processes
        normal_form = self.normal_form
        batch = list(texts) if normal_form is None else [normal_form(t) for t in texts]
        native = self.native
        encode = self.encoding.encode
        if native is None:  # text by text: encode_batch hands each text to a thread pool, ~6% slower here
            return [int32_ids(encode(text, allowed_special="all", disallowed_special=())) for text in batch]
        routed = self._routed
        out = []
        for text in batch:
            if routed.found_in(text):
                ids = encode(text, allowed_special="all", disallowed_special=())
            else:
                try:
                    ids = native.encode(text)
                except UnicodeEncodeError:  # a lone surrogate: tiktoken's own handling, as without a native engine
                    ids = encode(text, allowed_special="all", disallowed_special=())
            out.append(int32_ids(ids))
        return out


class TiktokenEncoder(RankOrderEncoder):
    """A byte-level file through tiktoken alone."""


class KitokenByteLevelEncoder(RankOrderEncoder):
    """A byte-level file split as GPT-2 splits, through kitoken (``kitoken_engine``); a file
    whose split is spelled otherwise is compared on the split sample first."""

    engine_name = "kitoken"

    def _native(self, tokenizer_json: str, reference: Any) -> tuple[Any, frozenset[str], bool]:
        pattern = self.parts.pattern
        if pattern != GPT2_PATTERN and pattern in KNOWN_SPLITS:
            raise OtherForm("kitoken cuts GPT-2's split; this file's is another known split")
        engine = kitoken_engine(tokenizer_json, self.parts.ranks)
        return engine, engine.routed, pattern == GPT2_PATTERN


class BpeOpenaiEncoder(RankOrderEncoder):
    """A file that is cl100k or o200k itself, through bpe-openai (``bpe_openai_engine``)."""

    engine_name = "bpe-openai"

    def _native(self, tokenizer_json: str, reference: Any) -> tuple[Any, frozenset[str], bool]:
        engine, own_spelling = bpe_openai_engine(self.parts.pattern, self.parts.ranks)
        if not own_spelling and keeps_numbers_whole(reference):
            # tiktoken's older cl100k spelling as tokenizers reads it: long numbers whole (whole_numbers)
            engine = WholeNumbers(engine.encode, self.encoding.encode_ordinary)
            self.engine_name = "bpe-openai (numbers of 4 or more digits by tiktoken)"
        return engine, frozenset(), own_spelling

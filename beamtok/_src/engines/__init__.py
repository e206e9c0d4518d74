"""The exact tokenizer engines: encoders that give the ids Hugging Face ``tokenizers`` gives
for a tokenizer file, faster, each refusing by name a file it cannot prove it reproduces.

- :mod:`~beamtok._src.engines.engine_choice`: each family's candidates in order and
  :func:`~beamtok._src.engines.engine_choice.choose`, the one place an engine is chosen;
- the encoders: :mod:`~beamtok._src.engines.byte_table` (byte-level BPE without merges: a byte's
  id from a table), :mod:`~beamtok._src.engines.byte_level_encoder` (byte-level BPE of the cl100k
  kind cut by the file's own split and merged in compiled code),
  :mod:`~beamtok._src.engines.tiktoken_backend` (byte-level BPE on tiktoken, with
  kitoken or bpe-openai inside), :mod:`~beamtok._src.engines.kitoken_families` (kitoken for
  SentencePiece-style BPE and WordPiece), :mod:`~beamtok._src.engines.cached_words` (words cut as
  the file's pre-tokenizer cuts them, then merged in compiled code or looked up in a cache);
- their parts: the word cutters and their choice, compiled BPE and Unigram kernels and their
  word cache, cl100k's split cut in compiled code, normal forms, split patterns, added-token
  routing, rank files.

:class:`Engine` is what every encoder answers; ``Tokenizer.engine_choice`` keeps the record of
the choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from beamtok._src.engines.engine_choice import Candidate, EngineChoice, Refusal, candidates_for, choose
from beamtok._src.engines.exact_encoder import MissingExtra, OtherForm, ProbeMismatch

__all__ = [
    "Candidate",
    "Engine",
    "EngineChoice",
    "MissingExtra",
    "OtherForm",
    "ProbeMismatch",
    "Refusal",
    "candidates_for",
    "choose",
]


class Engine(Protocol):
    """An exact encoder of one tokenizer file."""

    engine_name: str
    """Its name as ``Tokenizer.engine`` reports it (``kitoken``, ``beamtok cached words``...)."""
    native_refusal: str
    """Why a faster engine inside it does not run ('' where none was refused)."""

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[np.ndarray]:
        """Token ids (int32) of each text, as ``tokenizers`` gives them.

        Args:
            texts: The texts.
            add_special_tokens: Add the file's post-processor tokens (BOS/EOS), as
                ``tokenizers`` does.
        """
        ...

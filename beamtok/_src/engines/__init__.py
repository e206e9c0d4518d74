"""The exact tokenizer engines: encoders that give the ids Hugging Face ``tokenizers`` gives
for a tokenizer file, faster, each refusing by name a file it cannot prove it reproduces.

- :mod:`~beamtok._src.engines.engine_choice`: each family's candidates in order and
  :func:`~beamtok._src.engines.engine_choice.choose`, the one place an engine is chosen (an
  engine's own checks refuse; none picks another engine inside it);
- the encoders: :mod:`~beamtok._src.engines.byte_table` (byte-level BPE without merges: a byte's
  id from a table), :mod:`~beamtok._src.engines.byte_level_encoder` (byte-level BPE of the cl100k
  kind cut by the file's own split and merged in compiled code),
  :mod:`~beamtok._src.engines.tiktoken_backend` (byte-level BPE by rank order: tiktoken,
  kitoken, bpe-openai, each a candidate), :mod:`~beamtok._src.engines.kitoken_families` (kitoken for
  SentencePiece-style BPE and WordPiece), :mod:`~beamtok._src.engines.cached_words` (words cut as
  the file's pre-tokenizer cuts them, then merged in compiled code or looked up in a cache);
- their parts: the word cutters and their choice, compiled BPE and Unigram kernels and their
  word cache, cl100k's split cut in compiled code, normal forms, split patterns, added-token
  routing, rank files.

:class:`Engine` is what every encoder answers: each engine encodes plain text
(``exact_encoder.PlainEngine``), and the chooser hands it out wrapped in an ``ExactEncoder``,
which adds the file's added-token routing and its post-processor's BOS/EOS around it.
``Tokenizer.engine_choice`` keeps the record of the choice.
"""

from __future__ import annotations

from beamtok._src.engines.engine import Engine
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

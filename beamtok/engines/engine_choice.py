"""Which exact engine encodes a tokenizer file, chosen in one place.

Each tokenizer family has an ordered list of candidates; :func:`choose` builds them in turn
(each checks the file and encodes probe strings against ``tokenizers``) and takes the first
that passes. The result, :class:`EngineChoice`, keeps the engine taken and every candidate
refused before it with its reason, so ``Tokenizer.engine`` and ``beamtok inspect`` can say
why a file runs on the engine it does.

The families and their candidates, fastest first:

- **byte-level BPE** (GPT-2, cl100k, o200k, Qwen2, Llama 3): tiktoken, which runs kitoken or
  bpe-openai inside where one of them takes the file's split and ranks;
- **SentencePiece-style BPE**: the compiled BPE on marked words (numba), then kitoken, then
  cached words; kitoken first where an added token is whitespace (Gemma 2's newlines);
- **WordPiece**: kitoken, then cached words;
- **Unigram**: the compiled Unigram on cut words (numba), then cached words.

A candidate that was built but gave other ids than ``tokenizers`` on its probes
(:class:`~beamtok.engines.exact_encoder.ProbeMismatch`) is logged once at warning level: a
broken engine would otherwise leave a file on a slower one with nothing said.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from beamtok.base.errors import ConfigError
from beamtok.engines.cached_words import CachedWordsEncoder, CompiledBPEEncoder, CompiledUnigramEncoder, WordsEncoder
from beamtok.engines.exact_encoder import ExactEncoder, ProbeMismatch
from beamtok.engines.kitoken_families import KitokenEncoder, family_of_backend
from beamtok.engines.tiktoken_backend import TiktokenEncoder

log = logging.getLogger(__name__)

__all__ = ["BYTE_LEVEL", "Candidate", "EngineChoice", "Refusal", "candidates_for", "choose"]

BYTE_LEVEL = "byte-level BPE"
RAW_ENGINE = "tokenizers"

Build = Callable[[str, str, Any], ExactEncoder]


@dataclass(frozen=True)
class Candidate:
    """One engine a family may run on: its name and how it is built from ``(tokenizer.json
    text, tokenizer name, the file loaded by tokenizers)`` (ConfigError where it cannot be exact)."""

    name: str
    build: Build = field(repr=False, compare=False)


@dataclass(frozen=True)
class Refusal:
    """A candidate not taken, and why."""

    candidate: str
    reason: str
    probes_differed: bool = False


@dataclass(frozen=True)
class EngineChoice:
    """The outcome of :func:`choose`: the family, the encoder taken (None: ``tokenizers``
    itself encodes), and each candidate refused before it, in the order tried."""

    family: str
    encoder: ExactEncoder | None
    refused: tuple[Refusal, ...]

    @property
    def engine(self) -> str:
        """The name of the engine that encodes: the exact encoder's, or ``tokenizers``."""
        return self.encoder.engine_name if self.encoder is not None else RAW_ENGINE

    def why_not(self) -> str:
        """Every refusal, joined: why no exact engine (or a faster one) runs."""
        return "; ".join(f"{r.candidate}: {r.reason}" for r in self.refused)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON (``beamtok inspect --json``)."""
        return {
            "family": self.family,
            "engine": self.engine,
            "inner_refusal": self.encoder.native_refusal if self.encoder is not None else "",
            "refused": [{"candidate": r.candidate, "reason": r.reason} for r in self.refused],
        }


def _tiktoken(serialized: str, name: str, reference: Any) -> ExactEncoder:
    return TiktokenEncoder(serialized, name, reference=reference)


def _kitoken(serialized: str, name: str, reference: Any) -> ExactEncoder:
    return KitokenEncoder(serialized, name, reference=reference)


def _words(engine: type[WordsEncoder], family: str) -> Build:
    def build(serialized: str, name: str, reference: Any) -> ExactEncoder:
        return engine(serialized, name, family, reference=reference)

    return build


def candidates_for(family: str, backend: Any) -> list[Candidate]:
    """The candidates of ``family`` for this file (``backend``: its ``tokenizers.Tokenizer``),
    in the order they are tried."""
    if family == BYTE_LEVEL:
        return [Candidate("tiktoken", _tiktoken)]
    cached = Candidate("cached words", _words(CachedWordsEncoder, family))
    if family == "Unigram":
        return [Candidate("compiled Unigram", _words(CompiledUnigramEncoder, family)), cached]
    compiled = Candidate("compiled BPE", _words(CompiledBPEEncoder, family))
    kitoken = Candidate("kitoken", _kitoken)
    if family == "SentencePiece-style BPE":
        whitespace_added = any(not t.content.strip() for t in backend.get_added_tokens_decoder().values())
        return [kitoken, compiled, cached] if whitespace_added else [compiled, kitoken, cached]
    return [kitoken, cached]


_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


def choose(backend: Any, name: str, serialized: str) -> EngineChoice:
    """Build the candidates of ``backend``'s family in turn and take the first that is exact
    (see the module docstring); the record says which, and why each one before it was not."""
    family = family_of_backend(backend) or BYTE_LEVEL
    refused: list[Refusal] = []
    for candidate in candidates_for(family, backend):
        try:
            encoder = candidate.build(serialized, name, backend)
        except ProbeMismatch as e:
            refused.append(Refusal(candidate.name, str(e), probes_differed=True))
            _warn_once(name, candidate.name, str(e))
        except ConfigError as e:
            refused.append(Refusal(candidate.name, str(e)))
            log.debug("%s", e)
        else:
            return EngineChoice(family, encoder, tuple(refused))
    return EngineChoice(family, None, tuple(refused))


def _warn_once(name: str, candidate: str, reason: str) -> None:
    with _WARNED_LOCK:
        if (name, candidate) in _WARNED:
            return
        _WARNED.add((name, candidate))
    log.warning(
        "tokenizer %r: the %s engine was built but gave other ids than tokenizers on its probe strings, so a "
        "slower engine encodes this file (the tokens are the same). %s",
        name,
        candidate,
        reason,
    )

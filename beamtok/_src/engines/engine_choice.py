"""Which exact engine encodes a tokenizer file, chosen in one place.

Each tokenizer family has an ordered list of candidates; :func:`choose` builds them in turn
(each checks the file and encodes probe strings against ``tokenizers``) and takes the first
that passes. The result, :class:`EngineChoice`, keeps the engine taken and every candidate
refused before it with its reason, so ``Tokenizer.engine`` and ``beamtok inspect`` can say
why a file runs on the engine it does.

The families and their candidates, fastest first:

- **byte-level BPE** (GPT-2, cl100k, o200k, Qwen2, Llama 3): the byte table where the file
  has no merges (one token a byte: byte-level models, ``beamtok.testing.tiny_tokenizer``), the
  compiled byte-level BPE on the file's own split (numba) where the split parses into its rule
  (``split_rules``: GPT-2's, cl100k's and o200k's in each spelling; after bpe-openai where the
  split is o200k's, on which bpe-openai is faster), bpe-openai where the file is cl100k or
  o200k itself, kitoken where it splits as GPT-2 does (before the compiled engine for
  GPT-2's own ByteLevel split, where it starts sooner), then tiktoken;
- **SentencePiece-style BPE**: the compiled BPE on marked words (numba), then kitoken, then
  cached words; kitoken first where an added token is whitespace (Gemma 2's newlines);
- **WordPiece**: kitoken, then cached words;
- **Unigram**: the compiled Unigram on cut words (numba), then cached words.

A candidate that is exact must also win a short race against ``tokenizers`` on text of
several kinds (``engine_timing``), or the next one is tried: no file runs on an engine
slower than the library it wraps. Where no candidate takes the file, ``tokenizers`` itself
encodes it. A family's *usual*
candidate (tiktoken for byte-level BPE, cached words for the others) takes every file an exact
engine can; its refusal by the file's checks is said once at warning level, since the file then
runs on ``tokenizers`` with nothing else said.

Each refusal has a kind (``Refusal.kind``): the file is one the engine cannot be exact for
(``file``), the engine covers other forms of the family (``form``: the compiled byte-level BPE
cuts the splits its rule reads, not DeepSeek-V3's sequence), the engine was built but gave other ids than ``tokenizers`` on its probes
(``probes``: logged once at warning level, since a broken engine would otherwise leave a file
on a slower one with nothing said), the engine is exact but lost the race (``slower``: said
once at warning level), or the engine needs a package this install lacks
(``missing package``: the install's choice, which ``Tokenizer.engine`` does not count against
the file).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.byte_level_encoder import CompiledByteLevelEncoder
from beamtok._src.engines.byte_level_file import shared_byte_level_file
from beamtok._src.engines.byte_table import ByteTableEncoder
from beamtok._src.engines.cached_words import (
    CachedWordsEncoder,
    CompiledBPEEncoder,
    CompiledUnigramEncoder,
    WordsEncoder,
)
from beamtok._src.engines.engine import Engine
from beamtok._src.engines.engine_timing import race_on, slower_than_tokenizers
from beamtok._src.engines.exact_encoder import ExactEncoder, MissingExtra, OtherForm, ProbeMismatch
from beamtok._src.engines.kitoken_families import KitokenEncoder, family_of_backend
from beamtok._src.engines.split_rules import LETTERS_BY_CASE, split_rule_of
from beamtok._src.engines.tiktoken_backend import (
    BpeOpenaiEncoder,
    KitokenByteLevelEncoder,
    RankOrderEncoder,
    TiktokenEncoder,
)
from beamtok._src.engines.tokenizer_parts import TokenizerFile, read_spec

log = logging.getLogger(__name__)

__all__ = [
    "BYTE_LEVEL",
    "MISSING_PACKAGE",
    "NOT_FOR_FILE",
    "OTHER_FORM",
    "PROBES_DIFFERED",
    "SLOWER",
    "Candidate",
    "EngineChoice",
    "Refusal",
    "candidates_for",
    "choose",
]

BYTE_LEVEL = "byte-level BPE"
RAW_ENGINE = "tokenizers"

NOT_FOR_FILE = "file"
"""A refusal's kind: the engine cannot be exact for this file."""
PROBES_DIFFERED = "probes"
"""A refusal's kind: the engine was built but gave other ids than ``tokenizers`` on its probes."""
MISSING_PACKAGE = "missing package"
"""A refusal's kind: the engine needs a package this install does not have."""
OTHER_FORM = "form"
"""A refusal's kind: the engine covers other files of the family (another split pattern)."""
SLOWER = "slower"
"""A refusal's kind: the engine is exact for the file but lost the set-up race to ``tokenizers``."""

Build = Callable[[TokenizerFile], Engine]


@dataclass(frozen=True)
class Candidate:
    """One engine a family may run on.

    Attributes:
        name: The engine's name in refusals (``tiktoken``, ``compiled BPE``...).
        build: Makes the encoder from the file (shared by every candidate tried, so a build
            only reads it); raises ConfigError where it cannot be exact.
        usual: The candidate that takes every file of its family an exact engine can: its
            refusal by the file's checks is said at warning level.
    """

    name: str
    build: Build = field(repr=False, compare=False)
    usual: bool = False


@dataclass(frozen=True)
class Refusal:
    """A candidate not taken, and why.

    Attributes:
        candidate: The candidate's name.
        reason: Why it was not taken, in words.
        kind: ``file`` (it cannot be exact for this file), ``form`` (it covers other forms
            of the family), ``probes`` (built, but its ids differed on the probe strings),
            ``slower`` (exact, but slower than ``tokenizers``) or ``missing package`` (the
            install lacks what it needs).
    """

    candidate: str
    reason: str
    kind: str = NOT_FOR_FILE

    @property
    def probes_differed(self) -> bool:
        """Whether the engine was built but gave other ids than ``tokenizers``."""
        return self.kind == PROBES_DIFFERED

    @property
    def missing_package(self) -> bool:
        """Whether only a package this install lacks kept the engine out."""
        return self.kind == MISSING_PACKAGE

    @property
    def expected(self) -> bool:
        """Whether the refusal says nothing about the file: the install lacks a package, or
        the engine covers other forms of the family."""
        return self.kind in (MISSING_PACKAGE, OTHER_FORM)


@dataclass(frozen=True)
class EngineChoice:
    """The outcome of :func:`choose`.

    Attributes:
        family: The tokenizer file's family (``byte-level BPE``, ``Unigram``...).
        encoder: The encoder taken; None where ``tokenizers`` itself encodes.
        refused: Each candidate refused before it, in the order tried.
    """

    family: str
    encoder: Engine | None
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
            "refused": [{"candidate": r.candidate, "reason": r.reason, "kind": r.kind} for r in self.refused],
        }


def _engine(engine: type[ByteTableEncoder | CompiledByteLevelEncoder | KitokenEncoder]) -> Build:
    def build(file: TokenizerFile) -> Engine:
        return ExactEncoder(engine(file.serialized, file.name, reference=file.reference, spec=file.spec))

    return build


def _rank_order(engine: type[RankOrderEncoder]) -> Build:
    def build(file: TokenizerFile) -> Engine:
        parts = shared_byte_level_file(file)  # checked once for the three rank-order engines
        return ExactEncoder(engine(file.serialized, file.name, reference=file.reference, spec=file.spec, parts=parts))

    return build


def _words(engine: type[WordsEncoder], family: str) -> Build:
    def build(file: TokenizerFile) -> Engine:
        return ExactEncoder(engine(file.serialized, file.name, family, reference=file.reference, spec=file.spec))

    return build


def candidates_for(family: str, backend: Any) -> list[Candidate]:
    """The candidates of a family for one file, in the order they are tried.

    Args:
        family: The file's family, as ``family_of_backend`` names it.
        backend: The file as ``tokenizers`` loaded it (a ``tokenizers.Tokenizer``).
    """
    if family == BYTE_LEVEL:
        compiled_bpe = Candidate("compiled byte-level BPE", _engine(CompiledByteLevelEncoder))
        kitoken_bpe = Candidate("kitoken", _rank_order(KitokenByteLevelEncoder))
        bpe_openai = Candidate("bpe-openai", _rank_order(BpeOpenaiEncoder))
        # GPT-2's own split: kitoken starts in a third of the compiled engine's time, at 0.8x its rate
        gpt2_split = _splits_as_gpt2(backend)
        # o200k's: bpe-openai (which takes o200k's own ranks) is faster than the compiled cut on
        # every corpus measured, on long runs of letters by far (split_spellings.json)
        by_case = not gpt2_split and _splits_by_case(backend)
        if gpt2_split:
            native = [kitoken_bpe, compiled_bpe, bpe_openai]
        elif by_case:
            native = [bpe_openai, compiled_bpe, kitoken_bpe]
        else:
            native = [compiled_bpe, bpe_openai, kitoken_bpe]
        return [
            Candidate("byte table", _engine(ByteTableEncoder)),
            *native,
            Candidate("tiktoken", _rank_order(TiktokenEncoder), usual=True),
        ]
    cached = Candidate("cached words", _words(CachedWordsEncoder, family), usual=True)
    if family == "Unigram":
        return [Candidate("compiled Unigram", _words(CompiledUnigramEncoder, family)), cached]
    compiled = Candidate("compiled BPE", _words(CompiledBPEEncoder, family))
    kitoken = Candidate("kitoken", _engine(KitokenEncoder))
    if family == "SentencePiece-style BPE":
        whitespace_added = any(not t.content.strip() for t in backend.get_added_tokens_decoder().values())
        return [kitoken, compiled, cached] if whitespace_added else [compiled, kitoken, cached]
    return [kitoken, cached]


def _splits_as_gpt2(backend: Any) -> bool:
    """Whether the file's pre-tokenizer is a ByteLevel with its own (GPT-2's) split."""
    from tokenizers import pre_tokenizers

    pre = backend.pre_tokenizer
    return isinstance(pre, pre_tokenizers.ByteLevel) and bool(pre.use_regex)


def _splits_by_case(backend: Any) -> bool:
    """Whether the file's split pattern is one the compiled cut reads as letters by case (o200k's)."""
    try:
        steps = json.loads(backend.pre_tokenizer.__getstate__()).get("pretokenizers") or []
        return bool(split_rule_of(steps[0]["pattern"]["Regex"]).shape & LETTERS_BY_CASE)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return False


_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


def choose(backend: Any, name: str, serialized: str) -> EngineChoice:
    """Build the candidates of the file's family in turn and take the first that is exact
    (see the module docstring).

    Args:
        backend: The file as ``tokenizers`` loaded it (a ``tokenizers.Tokenizer``).
        name: The tokenizer's name, for messages.
        serialized: The file's ``tokenizer.json`` text.

    Returns:
        Which engine was taken, and why each one before it was not.
    """
    family = family_of_backend(backend) or BYTE_LEVEL
    file = TokenizerFile(serialized, name, backend, read_spec(serialized))  # parsed once for every candidate
    refused: list[Refusal] = []
    for candidate in candidates_for(family, backend):
        try:
            encoder = candidate.build(file)
        except ProbeMismatch as e:
            refused.append(Refusal(candidate.name, str(e), PROBES_DIFFERED))
            _warn_once(
                name,
                candidate.name,
                str(e),
                "the engine was built but gave other ids than tokenizers on its probe strings, so a slower engine "
                "encodes this file",
            )
        except MissingExtra as e:
            refused.append(Refusal(candidate.name, str(e), MISSING_PACKAGE))
            log.debug("%s", e)
        except OtherForm as e:
            refused.append(Refusal(candidate.name, str(e), OTHER_FORM))
            log.debug("%s", e)
        except ConfigError as e:
            refused.append(Refusal(candidate.name, str(e)))
            if candidate.usual:
                _warn_once(name, candidate.name, str(e), "its checks refuse this file, so tokenizers itself encodes it")
            else:
                log.debug("%s", e)
        else:
            slower = slower_than_tokenizers(encoder, backend) if race_on() else None
            if slower is None:
                return EngineChoice(family, encoder, tuple(refused))
            refused.append(Refusal(candidate.name, slower, SLOWER))
            _warn_once(name, candidate.name, slower, "the engine is exact but slower than tokenizers on this file")
    return EngineChoice(family, None, tuple(refused))


def _warn_once(name: str, candidate: str, reason: str, what: str) -> None:
    with _WARNED_LOCK:
        if (name, candidate) in _WARNED:
            return
        _WARNED.add((name, candidate))
    log.warning("tokenizer %r, %s engine: %s (the tokens are the same). %s", name, candidate, what, reason)

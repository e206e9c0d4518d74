"""Per-document steps of the shard processing: map, filter, tokenize, SFT and chat, BOS/EOS,
length filter.

Each step is a frozen record that checks its options when it is made, writes its JSON form
from its own fields (``op`` plus every serialized field), and applies itself to a block of
documents. The work on one document is a plain function of the shared core
(``beamtok._src.transforms``); a step is the thin wrapper that applies it to a block, so the Beam
DoFn and the online iterator run the very same code. Adding a step is one class here, its
entry in ``STEP_TYPES`` and one fluent method on ``Dataset`` (see docs/architecture.md).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from beamtok._src.base.errors import ConfigError, InputError
from beamtok._src.base.validate import check_choice, check_optional_int, unencodable
from beamtok._src.sources.documents import ParseFailure, RawDocument, SkipReason
from beamtok._src.transforms.bos_eos import ensure_bos_eos
from beamtok._src.transforms.engine_option import ENGINE_MODES
from beamtok._src.transforms.tokenize import Tokenizer, TokenizerRef

if TYPE_CHECKING:
    from beamtok._src.transforms.chat_masks import ChatTokenizer
    from beamtok._src.transforms.chat_spans import TrainedText

__all__ = [
    "MISSING",
    "TRUNCATION_POLICIES",
    "BosEosStep",
    "Doc",
    "FilterStep",
    "LengthFilterStep",
    "MapStep",
    "Step",
    "StepContext",
    "TokenizeStep",
    "unencodable",
]

TRUNCATION_POLICIES = ("completion_tail", "prompt_head", "drop")
# Skips that are choices of the pipeline, not bad input: counted, never raised.
POLICY_SKIPS = frozenset({SkipReason.EMPTY, SkipReason.FILTERED, SkipReason.TOO_SHORT, SkipReason.TOO_LONG})
NOT_SERIALIZED = {"json": False}  # field metadata: kept out of the JSON form and the fingerprint
MISSING = object()


class Doc:
    """A document moving through the steps of one block: its record, or why it was skipped."""

    __slots__ = ("raw", "record", "skip", "truncated")

    def __init__(self, raw: RawDocument) -> None:
        self.raw = raw
        self.record: dict[str, Any] = {}
        self.skip: str | None = None
        self.truncated = False
        if isinstance(raw.payload, ParseFailure):
            self.skip = raw.payload.reason
        else:
            self.record = raw.payload


class StepContext:
    """What steps need from the shard they run in: its URL for errors, the error policy, and
    the loaded tokenizers and chat templates (loaded once per process by ``prepare``)."""

    def __init__(
        self,
        url: str,
        on_error: str,
        tokenizers: dict[str, Tokenizer],
        chats: dict[str, tuple[TrainedText, ChatTokenizer]],
    ) -> None:
        self.url = url
        self.on_error = on_error
        self._tokenizers = tokenizers
        self._chats = chats

    def tokenizer(self, ref: TokenizerRef) -> Tokenizer:
        return self._tokenizers[ref.fingerprint]

    def chat(self, step: Any) -> tuple[TrainedText, ChatTokenizer]:
        """A chat step's renderer of trained text, and its way to ids and masks."""
        return self._chats[step.render_key()]

    def fail(self, doc: Doc, reason: str, message: str) -> None:
        """Count ``doc`` as skipped for ``reason``; under ``on_error="raise"`` bad input stops
        with the URL and line/row instead."""
        doc.skip = reason
        if self.on_error == "raise" and reason not in POLICY_SKIPS:
            raise InputError(f"{self.url}: {doc.raw.location}: {message}")

    def fail_missing(self, doc: Doc, name: str) -> None:
        why = getattr(doc.record, "left_out", {}).get(name)  # a reader that left the column out says why
        self.fail(
            doc,
            SkipReason.MISSING_FIELD,
            f"no field {name!r} (fields: {sorted(doc.record)[:8]})" + (f": {why}" if why else ""),
        )

    def text_field(self, doc: Doc, name: str, fallback: str | None = None) -> str | None:
        """The string in field ``name`` (or ``fallback``), or None after counting why not."""
        value = doc.record.get(name, MISSING)
        if value is MISSING and fallback is not None:
            value = doc.record.get(fallback, MISSING)
        if value is MISSING:
            self.fail_missing(doc, name)
            return None
        if not isinstance(value, str):
            self.fail(doc, SkipReason.WRONG_TYPE, f"field {name!r} is {type(value).__name__}, expected a string")
            return None
        problem = unencodable(value)
        if problem is not None:
            self.fail(doc, SkipReason.INVALID_UTF8, f"field {name!r}: {problem}")
            return None
        return value


@dataclass(frozen=True)
class Step(abc.ABC):
    """One per-document step: options checked at construction, JSON derived from its fields."""

    OP: ClassVar[str]
    TOKENIZES: ClassVar[bool] = False  # makes ``input_ids``
    NEEDS_TOKENS: ClassVar[bool] = False  # works on ``input_ids``
    SUPERVISED: ClassVar[bool] = False  # examples get labels and attention_mask

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.OP}
        for f in dataclasses.fields(self):
            if f.metadata.get("json", True):
                value = getattr(self, f.name)
                out[f.name] = value.to_json() if isinstance(value, TokenizerRef) else value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        names = {f.name for f in dataclasses.fields(cls) if f.metadata.get("json", True)}
        given = {k: v for k, v in data.items() if k != "op"}
        if set(given) != names:
            raise ConfigError(f"malformed {cls.OP} step: fields {sorted(given)}, expected {sorted(names)}")
        if "tokenizer" in given:
            given["tokenizer"] = TokenizerRef(**given["tokenizer"])
        return cls(**given)

    @property
    def tokenizer_ref(self) -> TokenizerRef | None:
        """The tokenizer this step loads, if any."""
        return None

    @property
    def chat_template(self) -> str | None:
        """The chat template source this step renders with, if any."""
        return None

    @property
    def encoder_engine(self) -> str | None:
        """Which encoder of its tokenizer the step calls: "auto" or "exact" (an exact engine
        where one takes the file), "tokenizers" (``tokenizers`` itself); None where it
        encodes nothing."""
        return "auto" if self.TOKENIZES else None

    @abc.abstractmethod
    def apply(self, docs: list[Doc], ctx: StepContext) -> None:
        """Apply the step to the live documents of a block, in place."""


@dataclass(frozen=True)
class _UserStep(Step):
    """A step around a user function, recorded by name: the function cannot come back from
    JSON, so a spec read from JSON (a cache's manifest) holds the name only, and running it
    is refused with a clear error."""

    name: str
    fn: Callable[[dict[str, Any]], Any] | None = dataclasses.field(default=None, compare=False, metadata=NOT_SERIALIZED)

    def _function(self) -> Callable[[dict[str, Any]], Any]:
        if self.fn is None:
            raise ConfigError(
                f"the {self.OP} step {self.name!r} was recorded by name only (its function cannot be rebuilt from JSON); "
                f"build the pipeline in Python with the same .{self.OP}(fn) to run it"
            )
        return self.fn


@dataclass(frozen=True)
class MapStep(_UserStep):
    """Apply a user function to each document record."""

    OP = "map"

    def apply(self, docs: list[Doc], ctx: StepContext) -> None:
        fn = self._function()
        for d in docs:
            out = fn(d.record)
            if not isinstance(out, dict):
                raise ConfigError(f"map {self.name} returned {type(out).__name__}, expected a dict")
            d.record = out


@dataclass(frozen=True)
class FilterStep(_UserStep):
    """Keep the documents for which a user predicate is true; the rest count as ``filtered``."""

    OP = "filter"

    def apply(self, docs: list[Doc], ctx: StepContext) -> None:
        fn = self._function()
        for d in docs:
            if not fn(d.record):
                d.skip = SkipReason.FILTERED


@dataclass(frozen=True)
class TokenizeStep(Step):
    """Tokenize the text field into ``input_ids``.

    ``engine`` ("auto", "exact" or "tokenizers") is not part of the JSON form or the
    fingerprint: an exact engine is only used where it is proven exact, so every choice gives
    the same tokens.
    """

    OP = "tokenize"
    TOKENIZES = True

    tokenizer: TokenizerRef
    field: str
    add_special_tokens: bool = True
    engine: str = dataclasses.field(default="auto", metadata=NOT_SERIALIZED)

    def __post_init__(self) -> None:
        check_choice(self.engine, "engine", ENGINE_MODES)

    @property
    def tokenizer_ref(self) -> TokenizerRef:
        return self.tokenizer

    @property
    def encoder_engine(self) -> str:
        return self.engine

    def apply(self, docs: list[Doc], ctx: StepContext) -> None:
        texts: list[str] = []
        targets: list[Doc] = []
        for d in docs:
            text = ctx.text_field(d, self.field)
            if text is not None:
                texts.append(text)
                targets.append(d)
        encoded = ctx.tokenizer(self.tokenizer).encode_batch(texts, self.add_special_tokens, self.engine)
        for d, ids in zip(targets, encoded):
            if len(ids) == 0:
                d.skip = SkipReason.EMPTY
            else:
                d.record = {**d.record, "input_ids": ids}


@dataclass(frozen=True)
class BosEosStep(Step):
    """Add the BOS and/or EOS token where a document lacks it."""

    OP = "ensure_bos_eos"
    NEEDS_TOKENS = True

    bos_id: int | None
    eos_id: int | None

    def apply(self, docs: list[Doc], ctx: StepContext) -> None:
        for d in docs:
            d.record["input_ids"] = ensure_bos_eos(d.record["input_ids"], self.bos_id, self.eos_id)


@dataclass(frozen=True)
class LengthFilterStep(Step):
    """Skip documents with fewer than ``min_tokens`` or more than ``max_tokens`` tokens."""

    OP = "filter_length"
    NEEDS_TOKENS = True

    min_tokens: int | None
    max_tokens: int | None

    def __post_init__(self) -> None:
        check_optional_int(self.min_tokens, "min_tokens")
        check_optional_int(self.max_tokens, "max_tokens")
        if self.min_tokens is not None and self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ConfigError(
                f"filter_length(min_tokens={self.min_tokens}, max_tokens={self.max_tokens}) keeps no document: min_tokens is above max_tokens"
            )

    def apply(self, docs: list[Doc], ctx: StepContext) -> None:
        for d in docs:
            n = len(d.record["input_ids"])
            if self.min_tokens is not None and n < self.min_tokens:
                d.skip = SkipReason.TOO_SHORT
            elif self.max_tokens is not None and n > self.max_tokens:
                d.skip = SkipReason.TOO_LONG

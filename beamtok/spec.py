"""The Spec: a frozen description of the per-shard step, and its fingerprint.

A Spec says how one shard becomes examples: how documents are read, which per-document steps
run (map, filter, tokenize, BOS/EOS, length filter), how tokens are packed and what happens
to bad input. Its JSON form is written into every state and cache manifest; its fingerprint
keys both, so a state or a cache made by another spec is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from beamtok.errors import ConfigError

__all__ = [
    "BosEosStep",
    "ChatStep",
    "FilterStep",
    "LengthFilterStep",
    "MapStep",
    "PackSpec",
    "SftStep",
    "SourceSpec",
    "Spec",
    "Step",
    "TokenizeStep",
    "TokenizerRef",
    "callable_name",
    "fingerprint_of",
    "is_supervised",
]

OnError = Literal["raise", "skip"]
PackMode = Literal["concat", "pad", "window", "none", "greedy", "first_fit"]
Remainder = Literal["pad", "drop", "keep"]
SOURCE_FORMATS = ("auto", "jsonl", "parquet", "text", "memory")


def fingerprint_of(obj: Any) -> str:
    """A short stable hash of a JSON-serializable object."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def callable_name(fn: Callable[..., Any]) -> str:
    """Name a user function by module, qualified name and a hash of its bytecode.

    Changing the function's code changes the spec fingerprint; values captured in a closure
    do not, so pass ``name=`` to ``map``/``filter`` when those matter.
    """
    code = getattr(fn, "__code__", None)
    digest = hashlib.sha256(code.co_code).hexdigest()[:8] if code is not None else "nocode"
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{module}.{qualname}#{digest}"


@dataclass(frozen=True)
class SourceSpec:
    """How records are read from a shard."""

    format: str = "auto"
    text_field: str = "text"
    columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.format not in SOURCE_FORMATS:
            raise ConfigError(f"format must be one of {SOURCE_FORMATS}, got {self.format!r}")
        if not self.text_field:
            raise ConfigError("text_field must be a non-empty string")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "text_field": self.text_field,
            "columns": list(self.columns) if self.columns is not None else None,
        }


@dataclass(frozen=True)
class TokenizerRef:
    """Which tokenizer to load, and the fingerprint its files must have."""

    name: str
    fingerprint: str
    bos_id: int | None
    eos_id: int | None
    pad_id: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fingerprint": self.fingerprint,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
            "pad_id": self.pad_id,
        }


@dataclass(frozen=True)
class MapStep:
    """Apply a user function to each document record."""

    fn: Callable[[dict[str, Any]], dict[str, Any]] = field(compare=False)
    name: str

    def to_json(self) -> dict[str, Any]:
        return {"op": "map", "name": self.name}


@dataclass(frozen=True)
class FilterStep:
    """Keep the documents for which a user predicate is true; the rest count as ``filtered``."""

    fn: Callable[[dict[str, Any]], bool] = field(compare=False)
    name: str

    def to_json(self) -> dict[str, Any]:
        return {"op": "filter", "name": self.name}


@dataclass(frozen=True)
class TokenizeStep:
    """Tokenize the text field into ``input_ids``.

    ``backend`` ("hf" or "tiktoken") is not part of the fingerprint: tiktoken is only used
    where it is proven exact, so both give the same tokens.
    """

    tokenizer: TokenizerRef
    field: str
    add_special_tokens: bool = True
    backend: str = "hf"

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "tokenize",
            "tokenizer": self.tokenizer.to_json(),
            "field": self.field,
            "add_special_tokens": self.add_special_tokens,
        }


@dataclass(frozen=True)
class BosEosStep:
    """Add the BOS and/or EOS token where a document lacks it."""

    bos_id: int | None
    eos_id: int | None

    def to_json(self) -> dict[str, Any]:
        return {"op": "ensure_bos_eos", "bos_id": self.bos_id, "eos_id": self.eos_id}


@dataclass(frozen=True)
class LengthFilterStep:
    """Skip documents with fewer than ``min_tokens`` or more than ``max_tokens`` tokens."""

    min_tokens: int | None
    max_tokens: int | None

    def to_json(self) -> dict[str, Any]:
        return {"op": "filter_length", "min_tokens": self.min_tokens, "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class SftStep:
    """Tokenize prompt/completion records: prompt masked out of the loss, EOS after the completion."""

    tokenizer: TokenizerRef
    prompt: str
    completion: str
    bos: bool
    max_length: int | None
    truncation: str

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "tokenize_sft",
            "tokenizer": self.tokenizer.to_json(),
            "prompt": self.prompt,
            "completion": self.completion,
            "bos": self.bos,
            "max_length": self.max_length,
            "truncation": self.truncation,
        }


@dataclass(frozen=True)
class ChatStep:
    """Render chat records with a Jinja template; only assistant turns (and their EOS) are trained."""

    tokenizer: TokenizerRef
    template: str
    messages: str
    bos: bool
    max_length: int | None
    truncation: str

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "tokenize_chat",
            "tokenizer": self.tokenizer.to_json(),
            "template": self.template,
            "messages": self.messages,
            "bos": self.bos,
            "max_length": self.max_length,
            "truncation": self.truncation,
        }


Step = MapStep | FilterStep | TokenizeStep | BosEosStep | LengthFilterStep | SftStep | ChatStep
TOKENIZING_STEPS = (TokenizeStep, SftStep, ChatStep)
TRUNCATION_POLICIES = ("completion_tail", "prompt_head", "drop")


@dataclass(frozen=True)
class PackSpec:
    """How token documents become rows.

    ``concat``: concatenate documents and cut rows of ``seq_len``; ``pad``: one document a row,
    truncated and padded to ``seq_len``; ``window``: one document cut into windows of
    ``seq_len`` starting every ``stride`` tokens; ``none``: one whole document a row;
    ``greedy`` / ``first_fit``: whole examples packed into padded rows of ``seq_len``, in order
    or first-fit over windows of ``window`` examples.
    """

    mode: PackMode
    seq_len: int | None
    pad_id: int
    stride: int | None = None
    remainder: Remainder = "pad"
    window: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("concat", "pad", "window", "none", "greedy", "first_fit"):
            raise ConfigError(f"unknown packing mode {self.mode!r}")
        if self.mode != "none" and (not isinstance(self.seq_len, int) or self.seq_len <= 0):
            raise ConfigError(f"seq_len must be a positive integer, got {self.seq_len!r}")
        if self.mode == "window":
            assert self.seq_len is not None
            if not isinstance(self.stride, int) or not 0 < self.stride <= self.seq_len:
                raise ConfigError(
                    f"stride must be an integer in 1..seq_len ({self.seq_len}), got {self.stride!r}"
                )
        if self.mode == "first_fit" and (not isinstance(self.window, int) or self.window < 1):
            raise ConfigError(f"first_fit packing needs a window of at least 1 example, got {self.window!r}")
        if self.remainder not in ("pad", "drop", "keep"):
            raise ConfigError(f"remainder must be 'pad', 'drop' or 'keep', got {self.remainder!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "seq_len": self.seq_len,
            "pad_id": self.pad_id,
            "stride": self.stride,
            "remainder": self.remainder,
            "window": self.window,
        }


@dataclass(frozen=True)
class Spec:
    """Everything that decides which examples a shard yields."""

    source: SourceSpec = SourceSpec()
    steps: tuple[Step, ...] = ()
    pack: PackSpec | None = None
    on_error: OnError = "raise"

    def __post_init__(self) -> None:
        if self.on_error not in ("raise", "skip"):
            raise ConfigError(f"on_error must be 'raise' or 'skip', got {self.on_error!r}")

    @property
    def tokenizers(self) -> list[TokenizerRef]:
        """The tokenizers of the tokenizing steps, in step order."""
        return [s.tokenizer for s in self.steps if isinstance(s, TOKENIZING_STEPS)]

    @property
    def tokenizer(self) -> TokenizerRef | None:
        """The tokenizer of the (last) tokenizing step, if any."""
        refs = self.tokenizers
        return refs[-1] if refs else None

    @property
    def supervised(self) -> bool:
        return is_supervised(self.to_json())

    @property
    def pad_id(self) -> int:
        if self.pack is not None:
            return self.pack.pad_id
        ref = self.tokenizer
        return ref.pad_id if ref is not None else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source.to_json(),
            "steps": [s.to_json() for s in self.steps],
            "pack": self.pack.to_json() if self.pack is not None else None,
            "on_error": self.on_error,
        }

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.to_json())

    @property
    def has_user_functions(self) -> bool:
        return any(isinstance(s, (MapStep, FilterStep)) for s in self.steps)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Spec:
        """Rebuild a spec from :meth:`to_json` output. User map/filter functions cannot be
        rebuilt from their names, so a spec that has them is refused."""
        try:
            src = data["source"]
            source = SourceSpec(src["format"], src["text_field"], tuple(src["columns"]) if src["columns"] is not None else None)
            steps = tuple(_step_from_json(step) for step in data["steps"])
            pack = PackSpec(**data["pack"]) if data["pack"] is not None else None
            return cls(source, steps, pack, data["on_error"])
        except (KeyError, TypeError) as e:
            raise ConfigError(f"malformed spec: {e!r}") from e


def is_supervised(spec: dict[str, Any]) -> bool:
    """Whether examples carry ``labels`` and ``attention_mask``: SFT and chat data, and
    sliding windows (whose overlaps are masked)."""
    ops = {s["op"] for s in spec["steps"]}
    return bool(ops & {"tokenize_sft", "tokenize_chat"}) or (spec["pack"] or {}).get("mode") == "window"


def _step_from_json(step: dict[str, Any]) -> Step:
    op = step["op"]
    if op == "tokenize":
        return TokenizeStep(TokenizerRef(**step["tokenizer"]), step["field"], step["add_special_tokens"])
    if op in ("tokenize_sft", "tokenize_chat"):
        fields = {k: v for k, v in step.items() if k not in ("op", "tokenizer")}
        cls = SftStep if op == "tokenize_sft" else ChatStep
        return cls(TokenizerRef(**step["tokenizer"]), **fields)
    if op == "ensure_bos_eos":
        return BosEosStep(step["bos_id"], step["eos_id"])
    if op == "filter_length":
        return LengthFilterStep(step["min_tokens"], step["max_tokens"])
    raise ConfigError(f"a spec with a user {op} step ({step.get('name')}) cannot be rebuilt from JSON")

"""The Spec: a frozen description of the shard processing, and its fingerprint.

A Spec says how one shard becomes examples: how documents are read, which per-document steps
run (see :mod:`beamtok._src.core.steps`), how tokens are packed and what happens to bad input. It
describes every pipeline, user ``map``/``filter`` steps included (recorded by name). Its JSON
form is written into every cache manifest and its fingerprint into every state, so a state or
a cache made by another spec is refused. ``Spec.from_json`` rebuilds any spec; user steps
come back as names that refuse to run without their function.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import check_choice
from beamtok._src.core.step_table import step_from_json
from beamtok._src.core.steps import BosEosStep, FilterStep, LengthFilterStep, MapStep, Step, TokenizeStep
from beamtok._src.core.supervised_steps import ChatStep, SftStep
from beamtok._src.transforms.packing_modes import PackSpec
from beamtok._src.transforms.tokenize import TokenizerRef
from beamtok._src.transforms.tokenizer_registry import resolve_tokenizer, serialize_tokenizers

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
    "build_encoders",
    "callable_name",
    "fingerprint_of",
    "json_differences",
    "tokenizers_to_warm",
]

OnError = Literal["raise", "skip"]
SOURCE_FORMATS = ("auto", "jsonl", "parquet", "arrow", "text", "mds", "memory")
ON_ERROR = ("raise", "skip")


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
        check_choice(self.format, "format", SOURCE_FORMATS)
        if not self.text_field or not isinstance(self.text_field, str):
            raise ConfigError("text_field must be a non-empty string")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "text_field": self.text_field,
            "columns": list(self.columns) if self.columns is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SourceSpec:
        columns = data["columns"]
        return cls(data["format"], data["text_field"], tuple(columns) if columns is not None else None)


@dataclass(frozen=True)
class Spec:
    """Everything that decides which examples a shard yields.

    Attributes:
        source: How records are read.
        steps: The per-document steps, in order.
        pack: The packing (None: none).
        on_error: ``"raise"`` or ``"skip"`` for bad records.
    """

    source: SourceSpec = SourceSpec()
    steps: tuple[Step, ...] = ()
    pack: PackSpec | None = None
    on_error: OnError = "raise"

    def __post_init__(self) -> None:
        check_choice(self.on_error, "on_error", ON_ERROR)
        tokenized = False
        for step in self.steps:
            if step.NEEDS_TOKENS and not tokenized:
                raise ConfigError(f"{step.OP}() needs tokens: call tokenize() before it")
            tokenized = tokenized or step.TOKENIZES
        if self.pack is not None and self.pack.packing.HAS_SEQ_LEN and not tokenized:
            raise ConfigError("packing needs tokens: call tokenize() before it")

    @property
    def tokenized(self) -> bool:
        """Whether the steps produce ``input_ids`` (else examples are records)."""
        return any(s.TOKENIZES for s in self.steps)

    @property
    def tokenizers(self) -> list[TokenizerRef]:
        """The tokenizers of the tokenizing steps, in step order."""
        return [ref for ref in (s.tokenizer_ref for s in self.steps) if ref is not None]

    @property
    def fast_path_tokenizers(self) -> list[TokenizerRef]:
        """The tokenizers a step encodes with through the fast path (any engine option but "tokenizers"),
        each once, in step order."""
        refs = {
            s.tokenizer_ref.fingerprint: s.tokenizer_ref
            for s in self.steps
            if s.tokenizer_ref is not None and s.encoder_engine in ("auto", "exact")
        }
        return list(refs.values())

    @property
    def tokenizer(self) -> TokenizerRef | None:
        """The tokenizer of the (last) tokenizing step, if any."""
        refs = self.tokenizers
        return refs[-1] if refs else None

    @property
    def supervised(self) -> bool:
        """Whether examples carry ``labels`` and ``attention_mask``: SFT and chat data, and
        sliding windows (whose overlaps are masked)."""
        return any(s.SUPERVISED for s in self.steps) or (self.pack is not None and self.pack.packing.SUPERVISED)

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

    @classmethod
    def from_json(cls, data: Any) -> Spec:
        """Rebuild a spec from :meth:`to_json` output (user steps as names that cannot run).

        Args:
            data: What ``to_json()`` returned.
        Returns:
            The Spec.
        Raises:
            ConfigError: The JSON is not a spec.
        """
        try:
            pack = PackSpec(**data["pack"]) if data["pack"] is not None else None
            steps = tuple(step_from_json(step) for step in data["steps"])
            return cls(SourceSpec.from_json(data["source"]), steps, pack, data["on_error"])
        except (KeyError, TypeError) as e:
            raise ConfigError(f"malformed spec: {e!r}") from e


def json_differences(old: Any, new: Any, shown: int = 4) -> str:
    """What differs between two JSON values, by dotted path: ``pack.seq_len 2048 → 1024``
    (at most ``shown`` differences, then how many more)."""
    flat_old, flat_new = _flatten(old), _flatten(new)
    found = []
    for path in [*flat_old, *(p for p in flat_new if p not in flat_old)]:
        before, after = flat_old.get(path, "absent"), flat_new.get(path, "absent")
        if before != after:
            found.append(f"{path or 'value'} {before} → {after}")
    more = f"; and {len(found) - shown} more" if len(found) > shown else ""
    return "; ".join(found[:shown]) + more


def _flatten(value: Any, path: str = "") -> dict[str, str]:
    if isinstance(value, dict) and value:
        out: dict[str, str] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        out = {}
        for i, inner in enumerate(value):
            out.update(_flatten(inner, f"{path}[{i}]"))
        return out
    text = json.dumps(value, sort_keys=True)
    return {path: text if len(text) <= 80 else text[:77] + "..."}


def tokenizers_to_warm(spec: Spec) -> list[dict[str, Any]]:
    """The tokenizers of ``spec``, serialized, each with whether a step may take its fast path
    (any engine option but "tokenizers"): what a worker server loads before forking workers."""
    fast = {ref.fingerprint for ref in spec.fast_path_tokenizers}
    unique = list({ref.fingerprint: ref for ref in spec.tokenizers}.values())
    return [{"tokenizer": blob, "fast_path": blob["fingerprint"] in fast} for blob in serialize_tokenizers(unique)]


def build_encoders(spec: Spec) -> None:
    """Build in this process the fast-path encoders the spec's steps call, before worker
    processes are forked from it (tokenization workers, DataLoader workers): each worker then
    finds its tokenizer, encoder built, among those this process holds, where it built its own
    before: one build instead of one per worker, its tables in pages the workers share until
    written.

    Args:
        spec: The shard processing whose tokenizing steps are to find their encoders built.
    """
    for ref in spec.fast_path_tokenizers:
        _ = resolve_tokenizer(ref).engine_choice  # a refusal is kept, and raised where the step asks for it

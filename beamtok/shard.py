"""ShardProcessor: the per-shard step shared by the online iterator and the Beam pipeline.

``ShardProcessor(spec).run(shard, start)`` reads the shard from a cursor, runs the spec's
per-document steps in blocks (so tokenization is batched), packs the token documents and
yields each example with the cursor *after* it: the ``(index, doc, token)`` where the next
example starts. The cursor after the last example is ``done``. Every example carries its
provenance (``shard``, ``index``, ``doc``, ``token``), so reopening the shard at any cursor
yields exactly the remaining examples, with no buffered tokens to save.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from beamtok.errors import ConfigError, InputError, StateError
from beamtok.sources.documents import ParseFailure, RawDocument, SkipReason
from beamtok.sources.readers import read_documents
from beamtok.sources.urls import Shard
from beamtok.spec import (
    TOKENIZING_STEPS,
    BosEosStep,
    ChatStep,
    FilterStep,
    LengthFilterStep,
    MapStep,
    SftStep,
    Spec,
    TokenizeStep,
)
from beamtok.transforms.bos_eos import ensure_bos_eos
from beamtok.transforms.pack import Packer, make_packer
from beamtok.transforms.sft import ChatTemplate, TokenDoc, assemble_chat, assemble_sft
from beamtok.transforms.tokenize import Tokenizer, resolve_tokenizer

__all__ = ["DocCounts", "DocItem", "Produced", "ShardCursor", "ShardProcessor", "pack_documents", "with_training_fields"]

# Skips that are choices of the pipeline, not bad input: counted, never raised.
POLICY_SKIPS = frozenset({SkipReason.EMPTY, SkipReason.FILTERED, SkipReason.TOO_SHORT, SkipReason.TOO_LONG})
BLOCK_DOCS = 256
FIRST_BLOCK_CHARS = 1 << 14  # small first blocks: a (re)opened shard yields its first example fast
BLOCK_CHARS = 1 << 21


@dataclass(frozen=True)
class ShardCursor:
    """Where the next example of a shard starts: its index, doc cursor and token offset."""

    index: int = 0
    doc: int = 0
    token: int = 0
    done: bool = False

    KEYS = ("index", "doc", "token", "done")

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "doc": self.doc, "token": self.token, "done": self.done}

    @classmethod
    def from_json(cls, state: Any) -> ShardCursor:
        if not isinstance(state, dict) or set(state) != set(cls.KEYS):
            raise StateError(f"shard cursor must have exactly the keys {cls.KEYS}, got {state!r}")
        ints = [state[k] for k in ("index", "doc", "token")]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
            raise StateError(f"shard cursor positions must be non-negative integers, got {state!r}")
        if not isinstance(state["done"], bool):
            raise StateError(f"shard cursor 'done' must be a boolean, got {state['done']!r}")
        return cls(state["index"], state["doc"], state["token"], state["done"])


@dataclass
class DocCounts:
    """What happened to documents: read = emitted + sum(skipped)."""

    read: int = 0
    emitted: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    truncated_tokens: int = 0
    dropped_tokens: int = 0
    truncated_docs: int = 0

    def add(self, other: DocCounts) -> None:
        self.read += other.read
        self.emitted += other.emitted
        self.skipped.update(other.skipped)
        self.truncated_tokens += other.truncated_tokens
        self.dropped_tokens += other.dropped_tokens
        self.truncated_docs += other.truncated_docs

    def to_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "emitted": self.emitted,
            "skipped": dict(sorted(self.skipped.items())),
            "truncated_tokens": self.truncated_tokens,
            "dropped_tokens": self.dropped_tokens,
            "truncated_docs": self.truncated_docs,
        }

    @classmethod
    def from_json(cls, state: dict[str, Any]) -> DocCounts:
        return cls(
            state["read"],
            state["emitted"],
            Counter(state["skipped"]),
            state["truncated_tokens"],
            state["dropped_tokens"],
            state["truncated_docs"],
        )


NO_COUNTS = DocCounts()  # shared by outputs that finished no document: read it, never add to it


class Produced(NamedTuple):
    """One output of a shard run.

    ``counts`` are the documents finished since the previous output (those before the doc
    cursor of ``cursor``). ``example`` is None only in the single output of a shard that
    yields no example at all, which still reports its counts.
    """

    example: dict[str, Any] | None
    cursor: ShardCursor
    counts: DocCounts


class DocItem(NamedTuple):
    """A document ready to pack: its doc cursor, its tokens (or record; None if skipped),
    and the counts to report once the stream has moved past ``counts_key``."""

    cursor: int
    value: Any
    counts_key: int
    counts: DocCounts


def pack_documents(
    shard_index: int, start: ShardCursor, docs: Iterable[DocItem], packer: Packer | None, supervised: bool = False
) -> Iterator[Produced]:
    """Pack documents into examples, each yielded with the cursor after it and its counts.

    One example is held back until the next one exists, so the cursor after an example is
    exactly where the next starts. Counts of a document are reported with the first example
    after which the stream no longer needs that document (its key is below the next start).
    """
    finished: deque[tuple[int, DocCounts]] = deque()
    pending: dict[str, Any] | None = None
    index = start.index

    def counts_before(doc: int | None) -> DocCounts:
        total = DocCounts()
        while finished and (doc is None or finished[0][0] < doc):
            total.add(finished.popleft()[1])
        return total

    def rows_of(item: DocItem) -> list[tuple[int, int, dict[str, Any]]]:
        if packer is None:
            return [(item.cursor, 0, dict(item.value))]
        offset = start.token if item.cursor == start.doc else 0
        before = packer.counts.truncated_tokens
        rows = [(r.doc, r.token, r.fields()) for r in packer.add(item.cursor, item.value, offset)]
        item.counts.truncated_tokens += packer.counts.truncated_tokens - before
        return rows

    def tail() -> list[tuple[int, int, dict[str, Any]]]:
        if packer is None:
            return []
        before = packer.counts.dropped_tokens
        rows = [(r.doc, r.token, r.fields()) for r in packer.finish()]
        if packer.counts.dropped_tokens > before:
            finished.append((-1, DocCounts(dropped_tokens=packer.counts.dropped_tokens - before)))
        return rows

    def items() -> Iterator[list[tuple[int, int, dict[str, Any]]]]:
        first = True
        for item in docs:
            finished.append((item.counts_key, item.counts))
            if item.value is not None:
                if first and start.token and packer is not None:
                    _check_token_offset(shard_index, start, item)
                first = False
                yield rows_of(item)
        yield tail()

    for rows in items():
        for row_doc, row_token, fields in rows:
            if pending is not None:
                yield Produced(pending, ShardCursor(index, row_doc, row_token), counts_before(row_doc))
            pending = _example(fields, shard_index, index, row_doc, row_token, supervised)
            index += 1
    done = ShardCursor(index, 0, 0, True)
    yield Produced(pending, done, counts_before(None))


def _check_token_offset(shard_index: int, start: ShardCursor, first: DocItem) -> None:
    """A cursor inside a document must name the first document read and a token in it."""
    if first.cursor != start.doc or start.token >= len(first.value):
        raise StateError(
            f"shard {shard_index}: the cursor's token offset {start.token} in document {start.doc} does not exist "
            f"(the first document here is {first.cursor}, {len(first.value)} tokens); the state does not match this data"
        )


class _Doc:
    """A document moving through the per-document steps of one block."""

    __slots__ = ("raw", "record", "skip", "truncated")

    def __init__(self, raw: RawDocument) -> None:
        self.raw = raw
        self.record: dict[str, Any] | None = None
        self.skip: str | None = None
        self.truncated = False
        if isinstance(raw.payload, ParseFailure):
            self.skip = raw.payload.reason
        else:
            self.record = raw.payload


class ShardProcessor:
    """Run a spec's per-shard step over one shard, from any cursor."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self._tokenizers: dict[str, Tokenizer] = {}
        self._templates: dict[str, ChatTemplate] = {}
        tokenized = False
        for step in spec.steps:
            if isinstance(step, TOKENIZING_STEPS):
                tokenized = True
            elif isinstance(step, (BosEosStep, LengthFilterStep)) and not tokenized:
                raise ConfigError(f"{step.to_json()['op']} needs tokens: call tokenize() before it")
        if spec.pack is not None and spec.pack.mode != "none" and not tokenized:
            raise ConfigError("packing needs tokens: call tokenize() before it")
        self.tokenized = tokenized
        self.supervised = spec.supervised

    def prepare(self) -> None:
        """Load the tokenizers the spec names (once per process); run() calls it lazily."""
        for step in self.spec.steps:
            if isinstance(step, TOKENIZING_STEPS) and step.tokenizer.fingerprint not in self._tokenizers:
                self._tokenizers[step.tokenizer.fingerprint] = resolve_tokenizer(step.tokenizer)
            if isinstance(step, ChatStep) and step.template not in self._templates:
                tok = self._tokenizers[step.tokenizer.fingerprint]
                self._templates[step.template] = ChatTemplate(step.template, tok.bos_token, tok.eos_token)

    def run(self, shard: Shard, start: ShardCursor | None = None) -> Iterator[Produced]:
        """Yield the examples of ``shard`` from ``start`` on, each with the cursor after it."""
        start = start or ShardCursor()
        if start.done:
            return
        self.prepare()
        packer = make_packer(self.spec.pack) if self.tokenized else None
        yield from pack_documents(shard.index, start, self._documents(shard, start), packer, self.supervised)

    def _documents(self, shard: Shard, start: ShardCursor) -> Iterator[DocItem]:
        docs = read_documents(shard, self.spec.source, start.doc)
        for block in _blocks(docs, self.spec.source.text_field):
            for doc in self._apply_steps(shard, block):
                cursor = doc.raw.cursor
                if doc.skip is not None:
                    yield DocItem(cursor, None, cursor, DocCounts(read=1, skipped=Counter({doc.skip: 1})))
                else:
                    assert doc.record is not None
                    record = doc.record
                    value = TokenDoc(record["input_ids"], record.get("loss_mask")) if self.tokenized else record
                    yield DocItem(cursor, value, cursor, DocCounts(read=1, emitted=1, truncated_docs=int(doc.truncated)))

    def _apply_steps(self, shard: Shard, block: list[RawDocument]) -> list[_Doc]:
        docs = [_Doc(raw) for raw in block]
        for d in docs:
            if d.skip is not None:
                self._fail(shard, d, d.skip, d.raw.payload.message)
        for step in self.spec.steps:
            alive = [d for d in docs if d.skip is None]
            if not alive:
                break
            if isinstance(step, MapStep):
                for d in alive:
                    out = step.fn(d.record)  # type: ignore[arg-type]
                    if not isinstance(out, dict):
                        raise ConfigError(f"map {step.name} returned {type(out).__name__}, expected a dict")
                    d.record = out
            elif isinstance(step, FilterStep):
                for d in alive:
                    if not step.fn(d.record):  # type: ignore[arg-type]
                        d.skip = SkipReason.FILTERED
            elif isinstance(step, TokenizeStep):
                self._tokenize(shard, step, alive)
            elif isinstance(step, SftStep):
                self._tokenize_sft(shard, step, alive)
            elif isinstance(step, ChatStep):
                self._tokenize_chat(shard, step, alive)
            elif isinstance(step, BosEosStep):
                for d in alive:
                    assert d.record is not None
                    d.record["input_ids"] = ensure_bos_eos(d.record["input_ids"], step.bos_id, step.eos_id)
            elif isinstance(step, LengthFilterStep):
                for d in alive:
                    assert d.record is not None
                    n = len(d.record["input_ids"])
                    if step.min_tokens is not None and n < step.min_tokens:
                        d.skip = SkipReason.TOO_SHORT
                    elif step.max_tokens is not None and n > step.max_tokens:
                        d.skip = SkipReason.TOO_LONG
        return docs

    def _tokenize(self, shard: Shard, step: TokenizeStep, alive: list[_Doc]) -> None:
        texts: list[str] = []
        targets: list[_Doc] = []
        for d in alive:
            text = self._text_field(shard, d, step.field)
            if text is not None:
                texts.append(text)
                targets.append(d)
        tokenizer = self._tokenizers[step.tokenizer.fingerprint]
        for d, ids in zip(targets, tokenizer.encode_batch(texts, step.add_special_tokens, step.backend)):
            if len(ids) == 0:
                d.skip = SkipReason.EMPTY
            else:
                d.record = {**d.record, "input_ids": ids}  # type: ignore[dict-item]

    def _text_field(self, shard: Shard, d: _Doc, name: str, fallback: str | None = None) -> str | None:
        """The string in field ``name`` (or ``fallback``), or None after counting why not."""
        assert d.record is not None
        value = d.record.get(name, _MISSING)
        if value is _MISSING and fallback is not None:
            value = d.record.get(fallback, _MISSING)
        if value is _MISSING:
            self._fail_missing(shard, d, name)
            return None
        if not isinstance(value, str):
            self._fail(shard, d, SkipReason.WRONG_TYPE, f"field {name!r} is {type(value).__name__}, expected a string")
            return None
        problem = _unencodable(value)
        if problem is not None:
            self._fail(shard, d, SkipReason.INVALID_UTF8, f"field {name!r}: {problem}")
            return None
        return value

    def _tokenize_sft(self, shard: Shard, step: SftStep, alive: list[_Doc]) -> None:
        fallback = "generation" if step.completion == "completion" else None
        pairs: list[tuple[_Doc, str, str]] = []
        for d in alive:
            prompt = self._text_field(shard, d, step.prompt)
            completion = self._text_field(shard, d, step.completion, fallback) if prompt is not None else None
            if prompt is None or completion is None:
                continue
            if not completion:
                d.skip = SkipReason.EMPTY
                continue
            pairs.append((d, prompt, completion))
        tok = self._tokenizers[step.tokenizer.fingerprint]
        encoded = tok.encode_batch([p for _, p, _ in pairs] + [c for _, _, c in pairs], add_special_tokens=False)
        prompts, completions = encoded[: len(pairs)], encoded[len(pairs) :]
        bos = tok.bos_id if step.bos else None
        assert tok.eos_id is not None
        for (d, _, _), p_ids, c_ids in zip(pairs, prompts, completions):
            built = assemble_sft(p_ids, c_ids, bos_id=bos, eos_id=tok.eos_id, max_length=step.max_length, truncation=step.truncation)
            self._set_tokens(d, built)

    def _tokenize_chat(self, shard: Shard, step: ChatStep, alive: list[_Doc]) -> None:
        template = self._templates[step.template]
        convs: list[tuple[_Doc, list[tuple[str, bool]]]] = []
        for d in alive:
            assert d.record is not None
            messages = d.record.get(step.messages, _MISSING)
            if messages is _MISSING:
                self._fail_missing(shard, d, step.messages)
                continue
            if not _is_conversation(messages):
                self._fail(shard, d, SkipReason.WRONG_TYPE, f"field {step.messages!r} must be a list of {{role, content}} objects with string values")
                continue
            try:
                segments = template.segments(messages)
            except Exception as e:  # a template can raise anything Jinja raises; the record is at fault
                self._fail(shard, d, SkipReason.TEMPLATE_ERROR, f"chat template failed: {type(e).__name__}: {e}")
                continue
            if not any(train for _, train in segments):
                d.skip = SkipReason.EMPTY  # nothing to learn: no assistant turn
                continue
            problem = next((p for p in (_unencodable(text) for text, _ in segments) if p is not None), None)
            if problem is not None:
                self._fail(shard, d, SkipReason.INVALID_UTF8, f"field {step.messages!r}: {problem}")
                continue
            convs.append((d, segments))
        tok = self._tokenizers[step.tokenizer.fingerprint]
        encoded = iter(tok.encode_batch([text for _, segs in convs for text, _ in segs], add_special_tokens=False))
        bos = tok.bos_id if step.bos else None
        assert tok.eos_id is not None
        for d, segs in convs:
            ids = [next(encoded) for _ in segs]
            built = assemble_chat(ids, [t for _, t in segs], bos_id=bos, eos_id=tok.eos_id, max_length=step.max_length, truncation=step.truncation)
            self._set_tokens(d, built)

    @staticmethod
    def _set_tokens(d: _Doc, built: tuple[TokenDoc, bool] | None) -> None:
        if built is None:
            d.skip = SkipReason.TOO_LONG
            return
        doc, truncated = built
        assert d.record is not None
        d.record = {**d.record, "input_ids": doc.ids, "loss_mask": doc.mask}
        d.truncated = truncated

    def _fail_missing(self, shard: Shard, d: _Doc, name: str) -> None:
        assert d.record is not None
        self._fail(shard, d, SkipReason.MISSING_FIELD, f"no field {name!r} (fields: {sorted(d.record)[:8]})")

    def _fail(self, shard: Shard, d: _Doc, reason: str, message: str) -> None:
        d.skip = reason
        if self.spec.on_error == "raise" and reason not in POLICY_SKIPS:
            raise InputError(f"{shard.url}: {d.raw.location}: {message}")


_MISSING = object()


def _unencodable(text: str) -> str | None:
    """Why ``text`` cannot go to a tokenizer (a lone surrogate, e.g. from a JSON ``\\ud800``
    escape, has no UTF-8 form), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"text holds a lone surrogate {text[e.start]!r} at character {e.start}, which has no UTF-8 form"
    return None


def _example(fields: dict[str, Any], shard: int, index: int, doc: int, token: int, supervised: bool) -> dict[str, Any]:
    example = with_training_fields(fields) if supervised else dict(fields)
    example.update(shard=shard, index=index, doc=doc, token=token)
    return example


def with_training_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Add ``labels`` (-100 where the loss mask is 0) and ``attention_mask`` (1 on real tokens)."""
    labels = np.where(fields["loss_mask"] == 1, fields["input_ids"], np.int32(-100)).astype(np.int32)
    attention = (fields["segment_ids"] > 0).astype(np.int8)
    out = dict(fields)
    out.update(labels=labels, attention_mask=attention)
    return out


def _is_conversation(messages: Any) -> bool:
    return isinstance(messages, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
    )


def _blocks(docs: Iterator[RawDocument], text_field: str) -> Iterator[list[RawDocument]]:
    """Group documents so tokenization is batched; boundaries never change the output.

    The character budget starts small and doubles per block up to BLOCK_CHARS.
    """
    block: list[RawDocument] = []
    chars = 0
    budget = FIRST_BLOCK_CHARS
    for raw in docs:
        block.append(raw)
        payload = raw.payload
        if isinstance(payload, dict):
            text = payload.get(text_field)
            chars += len(text) if isinstance(text, str) else 0
        if len(block) >= BLOCK_DOCS or chars >= budget:
            yield block
            block, chars = [], 0
            budget = min(2 * budget, BLOCK_CHARS)
    if block:
        yield block

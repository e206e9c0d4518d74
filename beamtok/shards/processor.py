"""ShardProcessor: the shard processing shared by the online iterator and the Beam pipeline.

``ShardProcessor(spec).run(shard, start)`` reads the shard from a cursor, runs the spec's
per-document steps in blocks (so tokenization is batched), packs the token documents and
yields each example with the cursor *after* it: the ``(index, doc, token)`` where the next
example starts. The cursor after the last example is ``done``. Every example carries its
provenance (``shard``, ``index``, ``doc``, ``token``), so reopening the shard at any cursor
yields exactly the remaining examples, with no buffered tokens to save.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from beamtok.base.errors import StateError
from beamtok.base.lookahead import lookahead
from beamtok.core.spec import Spec
from beamtok.core.steps import Doc, StepContext
from beamtok.sources.documents import RawDocument, SkipReason
from beamtok.sources.readers import read_documents
from beamtok.sources.urls import Shard
from beamtok.transforms.pack import Packer
from beamtok.transforms.packing_modes import make_packer
from beamtok.transforms.sft import ChatTemplate, TokenDoc
from beamtok.transforms.tokenize import Tokenizer, resolve_tokenizer

__all__ = [
    "END_OF_SHARD",
    "NO_COUNTS",
    "DocCounts",
    "DocItem",
    "Produced",
    "ShardCursor",
    "ShardPacker",
    "ShardProcessor",
    "check_token_offset",
    "with_training_fields",
]

BLOCK_DOCS = 256
FIRST_BLOCK_CHARS = 1 << 14  # small first blocks: a (re)opened shard yields its first example fast
BLOCK_CHARS = 1 << 21
END_OF_SHARD = 1 << 62  # a DocItem whose counts are due only when the shard ends


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


_NO_SKIPS: Mapping[str, int] = MappingProxyType({})


def _add_skips(a: Mapping[str, int], b: Mapping[str, int]) -> Mapping[str, int]:
    if not b:
        return a
    if not a:
        return b
    return Counter(a) + Counter(b)


@dataclass(frozen=True)
class DocCounts:
    """What happened to documents: read = emitted + sum(skipped). Immutable; add with ``+``."""

    read: int = 0
    emitted: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    truncated_tokens: int = 0
    dropped_tokens: int = 0
    truncated_docs: int = 0

    def __post_init__(self) -> None:
        if self.skipped is not _NO_SKIPS:
            frozen = MappingProxyType({k: v for k, v in sorted(self.skipped.items()) if v}) if self.skipped else _NO_SKIPS
            object.__setattr__(self, "skipped", frozen)

    def __add__(self, other: DocCounts) -> DocCounts:
        if not other:
            return self
        if not self:
            return other
        return DocCounts(
            self.read + other.read,
            self.emitted + other.emitted,
            _add_skips(self.skipped, other.skipped),
            self.truncated_tokens + other.truncated_tokens,
            self.dropped_tokens + other.dropped_tokens,
            self.truncated_docs + other.truncated_docs,
        )

    def __bool__(self) -> bool:
        return bool(self.read or self.truncated_tokens or self.dropped_tokens)

    def __reduce__(self) -> tuple[Any, ...]:  # a mapping proxy does not pickle; its dict does
        fields = (self.read, self.emitted, dict(self.skipped), self.truncated_tokens, self.dropped_tokens, self.truncated_docs)
        return (DocCounts, fields)

    def skip_emitted(self, reason: str) -> DocCounts:
        """These counts with one emitted document moved to ``skipped[reason]``."""
        return replace(self, emitted=self.emitted - 1, skipped={**self.skipped, reason: self.skipped.get(reason, 0) + 1})

    def to_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "emitted": self.emitted,
            "skipped": dict(self.skipped),
            "truncated_tokens": self.truncated_tokens,
            "dropped_tokens": self.dropped_tokens,
            "truncated_docs": self.truncated_docs,
        }

    @classmethod
    def from_json(cls, state: dict[str, Any]) -> DocCounts:
        return cls(
            state["read"],
            state["emitted"],
            dict(state["skipped"]),
            state["truncated_tokens"],
            state["dropped_tokens"],
            state["truncated_docs"],
        )


NO_COUNTS = DocCounts()


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
    """A document ready to pack: its doc cursor, its tokens (or record; None if skipped), its
    counts, and the last doc cursor those counts cover (``END_OF_SHARD``: the rest of the
    shard). The counts are reported with the first example that starts past ``through``."""

    cursor: int
    value: Any
    counts: DocCounts
    through: int


class ShardPacker:
    """Pack one shard's documents into examples, from a start cursor.

    Each example comes with the cursor after it (where the next example starts, or ``done``)
    and with the counts of the documents the stream no longer needs once it is there.
    """

    def __init__(self, shard_index: int, start: ShardCursor, packer: Packer | None, supervised: bool = False) -> None:
        self.shard_index = shard_index
        self.start = start
        self.packer = packer
        self.supervised = supervised
        self._pending_counts: deque[tuple[int, DocCounts]] = deque()

    def run(self, docs: Iterable[DocItem]) -> Iterator[Produced]:
        index = self.start.index
        for (doc, token, fields), following in lookahead(self._rows(docs)):
            if following is None:
                cursor, counts = ShardCursor(index + 1, 0, 0, True), self._counts_due(None)
            else:
                cursor, counts = ShardCursor(index + 1, following[0], following[1]), self._counts_due(following[0])
            yield Produced(self._example(fields, index, doc, token), cursor, counts)
            index += 1
        if index == self.start.index:  # no example at all: the counts still go out
            yield Produced(None, ShardCursor(index, 0, 0, True), self._counts_due(None))

    def _rows(self, docs: Iterable[DocItem]) -> Iterator[tuple[int, int, dict[str, Any]]]:
        first = True
        for item in docs:
            if item.value is None:
                self._pending_counts.append((item.through, item.counts))
                continue
            if first and self.start.token and getattr(self.packer, "TOKEN_OFFSETS", self.packer is not None):
                check_token_offset(self.shard_index, self.start, item)
            first = False
            yield from self._pack(item)
        yield from self._finish()

    def _pack(self, item: DocItem) -> list[tuple[int, int, dict[str, Any]]]:
        counts = item.counts
        if self.packer is None:
            rows = [(item.cursor, 0, dict(item.value))]
        else:
            before = replace(self.packer.counts)
            offset = self.start.token if item.cursor == self.start.doc else 0
            rows = [(r.doc, r.token, r.fields()) for r in self.packer.add(item.cursor, item.value, offset)]
            after = self.packer.counts
            if after.truncated_tokens > before.truncated_tokens:
                counts = replace(counts, truncated_tokens=counts.truncated_tokens + after.truncated_tokens - before.truncated_tokens)
            if after.too_long > before.too_long:
                counts = counts.skip_emitted(SkipReason.TOO_LONG)
        self._pending_counts.append((item.through, counts))
        return rows

    def _finish(self) -> list[tuple[int, int, dict[str, Any]]]:
        if self.packer is None:
            return []
        before = self.packer.counts.dropped_tokens
        rows = [(r.doc, r.token, r.fields()) for r in self.packer.finish()]
        if self.packer.counts.dropped_tokens > before:
            self._pending_counts.append((END_OF_SHARD, DocCounts(dropped_tokens=self.packer.counts.dropped_tokens - before)))
        return rows

    def _counts_due(self, next_doc: int | None) -> DocCounts:
        """Counts of documents before ``next_doc`` (None: all that are left)."""
        total = NO_COUNTS
        while self._pending_counts and (next_doc is None or self._pending_counts[0][0] < next_doc):
            total = total + self._pending_counts.popleft()[1]
        return total

    def _example(self, fields: dict[str, Any], index: int, doc: int, token: int) -> dict[str, Any]:
        example = with_training_fields(fields) if self.supervised else fields  # fields are this row's own dict
        example.update(shard=self.shard_index, index=index, doc=doc, token=token)
        return example



def check_token_offset(shard_index: int, start: ShardCursor, first: DocItem) -> None:
    """A cursor inside a document must name the first document read and a token in it."""
    if first.cursor != start.doc or start.token >= len(first.value):
        raise StateError(
            f"shard {shard_index}: the cursor's token offset {start.token} in document {start.doc} does not exist "
            f"(the first document here is {first.cursor}, {len(first.value)} tokens); the state does not match this data"
        )


class ShardProcessor:
    """Run a spec's shard processing over one shard, from any cursor."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self._tokenizers: dict[str, Tokenizer] = {}
        self._templates: dict[str, ChatTemplate] = {}

    def prepare(self) -> None:
        """Load the tokenizers the spec names (once per process); run() calls it lazily."""
        for step in self.spec.steps:
            ref = step.tokenizer_ref
            if ref is not None and ref.fingerprint not in self._tokenizers:
                self._tokenizers[ref.fingerprint] = resolve_tokenizer(ref)
            source = step.chat_template
            if ref is not None and source is not None and source not in self._templates:
                tok = self._tokenizers[ref.fingerprint]
                self._templates[source] = ChatTemplate(source, tok.bos_token, tok.eos_token)

    def run(self, shard: Shard, start: ShardCursor | None = None) -> Iterator[Produced]:
        """Yield the examples of ``shard`` from ``start`` on, each with the cursor after it."""
        start = start or ShardCursor()
        if start.done:
            return
        yield from self.pack(shard.index, self.documents(shard, start.doc), start)

    def documents(self, shard: Shard, start: int = 0, stop: int | None = None) -> Iterator[DocItem]:
        """The documents of ``shard`` with doc cursors in ``[start, stop)``, through the
        per-document steps, ready to pack. Steps see one document at a time, so the items of
        a file read in ranges are those of the file read whole."""
        self.prepare()
        ctx = StepContext(shard.url, self.spec.on_error, self._tokenizers, self._templates)
        tokenized = self.spec.tokenized
        raw = read_documents(shard, self.spec.source, start)
        if stop is not None:
            raw = itertools.takewhile(lambda document: document.cursor < stop, raw)
        for block in _blocks(raw, self.spec.source.text_field):
            for doc in self._apply_steps(ctx, block):
                cursor = doc.raw.cursor
                if doc.skip is not None:
                    yield DocItem(cursor, None, DocCounts(read=1, skipped={doc.skip: 1}), cursor)
                else:
                    value = TokenDoc(doc.record["input_ids"], doc.record.get("loss_mask")) if tokenized else doc.record
                    yield DocItem(cursor, value, DocCounts(read=1, emitted=1, truncated_docs=int(doc.truncated)), cursor)

    def pack(self, shard_index: int, documents: Iterable[DocItem], start: ShardCursor | None = None) -> Iterator[Produced]:
        """Pack a shard's documents (from :meth:`documents`, read from ``start``) into examples."""
        packer = make_packer(self.spec.pack) if self.spec.tokenized else None
        return ShardPacker(shard_index, start or ShardCursor(), packer, self.spec.supervised).run(documents)

    def _apply_steps(self, ctx: StepContext, block: list[RawDocument]) -> list[Doc]:
        docs = [Doc(raw) for raw in block]
        for d in docs:
            if d.skip is not None:
                ctx.fail(d, d.skip, d.raw.payload.message)
        for step in self.spec.steps:
            alive = [d for d in docs if d.skip is None]
            if not alive:
                break
            step.apply(alive, ctx)
        return docs


def with_training_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Add ``labels`` (-100 where the loss mask is 0) and ``attention_mask`` (1 on real tokens)."""
    labels = np.where(fields["loss_mask"] == 1, fields["input_ids"], np.int32(-100)).astype(np.int32)
    attention = (fields["segment_ids"] > 0).astype(np.int8)
    out = dict(fields)
    out.update(labels=labels, attention_mask=attention)
    return out


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

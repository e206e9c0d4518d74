"""ShardProcessor: the shard processing shared by the online iterator and the Beam pipeline.

``ShardProcessor(spec).run(shard, start)`` reads the shard from a cursor, runs the spec's
per-document steps in blocks (so tokenization is batched), packs the token documents and
yields each example with the cursor *after* it: the ``(index, doc, token)`` where the next
example starts. The cursor after the last example is ``done``. Every example carries its
provenance (``shard``, ``index``, ``doc``, ``token``), so reopening the shard at any cursor
yields exactly the remaining examples, with no buffered tokens to save.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from beamtok._src.core.spec import Spec
from beamtok._src.core.steps import Doc, StepContext
from beamtok._src.core.supervised_steps import ChatStep
from beamtok._src.shards.items import DocCounts, DocItem, Produced, ShardCursor
from beamtok._src.shards.packing import packed
from beamtok._src.sources.documents import RawDocument
from beamtok._src.sources.readers import read_documents
from beamtok._src.sources.urls import Shard
from beamtok._src.transforms.chat_masks import ChatTokenizer
from beamtok._src.transforms.chat_spans import TrainedText
from beamtok._src.transforms.sft import TokenDoc
from beamtok._src.transforms.tokenize import Tokenizer
from beamtok._src.transforms.tokenizer_registry import resolve_tokenizer

__all__ = ["ShardProcessor"]

BLOCK_DOCS = 256
FIRST_BLOCK_CHARS = 1 << 14  # small first blocks: a (re)opened shard yields its first example fast
BLOCK_CHARS = 1 << 21


class ShardProcessor:
    """Run a spec's shard processing over one shard, from any cursor."""

    def __init__(self, spec: Spec) -> None:
        """Nothing is loaded until the first shard: the tokenizers load in ``prepare()``.

        Args:
            spec: What decides the examples: reading, per-document steps, packing.
        """
        self.spec = spec
        self._tokenizers: dict[str, Tokenizer] = {}
        self._chats: dict[str, tuple[TrainedText, ChatTokenizer]] = {}

    def prepare(self) -> None:
        """Load the tokenizers the spec names (once per process); run() calls it lazily."""
        for step in self.spec.steps:
            ref = step.tokenizer_ref
            if ref is not None and ref.fingerprint not in self._tokenizers:
                self._tokenizers[ref.fingerprint] = resolve_tokenizer(ref)
            if ref is not None and isinstance(step, ChatStep) and step.render_key() not in self._chats:
                tok = self._tokenizers[ref.fingerprint]
                trained = TrainedText(step.renderer(), tok.added_tokens(), tok.eos_token)
                self._chats[step.render_key()] = (trained, ChatTokenizer(tok))

    def run(self, shard: Shard, start: ShardCursor | None = None) -> Iterator[Produced]:
        """Yield the examples of ``shard`` from ``start`` on, each with the cursor after it.

        Args:
            shard: The shard.
            start: Where to start (None: the shard's start).
        Yields:
            Each example (``Produced``) with the cursor after it.
        """
        start = start or ShardCursor()
        if start.done:
            return
        yield from self.pack(shard.index, self.documents(shard, start.doc), start)

    def documents(self, shard: Shard, start: int = 0, stop: int | None = None) -> Iterator[DocItem]:
        """The documents of ``shard`` with doc cursors in ``[start, stop)``, through the
        per-document steps, ready to pack. Steps see one document at a time, so the items of
        a file read in ranges are those of the file read whole.

        Args:
            shard: The shard.
            start: The first doc cursor.
            stop: The doc cursor to stop at (None: the end).
        Yields:
            Each document after the per-document steps.
        """
        self.prepare()
        ctx = StepContext(shard.url, self.spec.on_error, self._tokenizers, self._chats)
        tokenized = self.spec.tokenized
        raw = read_documents(shard, self.spec.source, start, stop)
        for block in _blocks(raw, self.spec.source.text_field):
            for doc in self._apply_steps(ctx, block):
                cursor = doc.raw.cursor
                if doc.skip is not None:
                    yield DocItem(cursor, None, DocCounts(read=1, skipped={doc.skip: 1}), cursor)
                else:
                    value = TokenDoc(doc.record["input_ids"], doc.record.get("loss_mask")) if tokenized else doc.record
                    yield DocItem(
                        cursor, value, DocCounts(read=1, emitted=1, truncated_docs=int(doc.truncated)), cursor
                    )

    def pack(
        self, shard_index: int, documents: Iterable[DocItem], start: ShardCursor | None = None
    ) -> Iterator[Produced]:
        """Pack a shard's documents (from :meth:`documents`, read from ``start``) into examples,
        each with the cursor after it (``beamtok._src.shards.packing``: the one packer of each mode).

        Args:
            shard_index: The shard's number.
            documents: Its documents, from :meth:`documents`.
            start: Where they were read from.
        Yields:
            Each example with the cursor after it.
        """
        return packed(
            shard_index,
            documents,
            self.spec.pack,
            self.spec.supervised,
            start or ShardCursor(),
            tokenized=self.spec.tokenized,
        )

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

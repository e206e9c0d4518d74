"""The per-document steps of supervised data: prompt/completion pairs (``tokenize_sft``) and
conversations through a chat template (``tokenize_chat``), each giving token ids with a loss
mask over what the model is trained to write."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.sizes import MAX_SEQ_LEN, ROW_BYTES_PER_TOKEN, check_ceiling
from beamtok._src.base.validate import check_choice, check_optional_int
from beamtok._src.core.steps import MISSING, TRUNCATION_POLICIES, Doc, Step, StepContext, unencodable
from beamtok._src.sources.documents import SkipReason
from beamtok._src.transforms.chat_render import ChatRenderer
from beamtok._src.transforms.sft import TokenDoc, assemble_chat, assemble_sft
from beamtok._src.transforms.tokenize import TokenizerRef

__all__ = ["ChatStep", "SftStep"]


@dataclass(frozen=True)
class _SupervisedStep(Step):
    """Shared options of the SFT and chat steps."""

    TOKENIZES = True
    SUPERVISED = True

    tokenizer: TokenizerRef
    bos: bool
    max_length: int | None
    truncation: str

    def __post_init__(self) -> None:
        check_choice(self.truncation, "truncation", TRUNCATION_POLICIES)
        check_optional_int(self.max_length, "max_length", minimum=2)
        if self.max_length is not None:
            check_ceiling(self.max_length, "max_length", MAX_SEQ_LEN, "tokens", bytes_each=ROW_BYTES_PER_TOKEN)
        if self.tokenizer.eos_id is None and self.adds_eos:
            raise ConfigError(
                f"{self.OP}(): tokenizer {self.tokenizer.name!r} has no EOS token to end completions with"
            )
        if self.bos and self.tokenizer.bos_id is None:
            raise ConfigError(f"{self.OP}(): tokenizer {self.tokenizer.name!r} has no BOS token")

    @property
    def tokenizer_ref(self) -> TokenizerRef:
        return self.tokenizer

    @property
    def adds_eos(self) -> bool:
        """Whether the step puts the tokenizer's EOS token into examples itself."""
        return True

    def _set_tokens(self, d: Doc, built: tuple[TokenDoc, bool] | None) -> None:
        if built is None:
            d.skip = SkipReason.TOO_LONG
            return
        doc, truncated = built
        d.record = {**d.record, "input_ids": doc.ids, "loss_mask": doc.mask}
        d.truncated = truncated


@dataclass(frozen=True, kw_only=True)
class SftStep(_SupervisedStep):
    """Tokenize prompt/completion records: prompt masked out of the loss, EOS after the completion."""

    OP = "tokenize_sft"

    prompt: str
    completion: str

    def apply(self, docs: list[Doc], ctx: StepContext) -> None:
        fallback = "generation" if self.completion == "completion" else None
        pairs: list[tuple[Doc, str, str]] = []
        for d in docs:
            prompt = ctx.text_field(d, self.prompt)
            completion = ctx.text_field(d, self.completion, fallback) if prompt is not None else None
            if prompt is None or completion is None:
                continue
            if not completion:
                d.skip = SkipReason.EMPTY
                continue
            pairs.append((d, prompt, completion))
        tok = ctx.tokenizer(self.tokenizer)
        encoded = tok.encode_batch([p for _, p, _ in pairs] + [c for _, _, c in pairs], add_special_tokens=False)
        prompts, completions = encoded[: len(pairs)], encoded[len(pairs) :]
        bos = tok.bos_id if self.bos else None
        assert tok.eos_id is not None
        for (d, _, _), p_ids, c_ids in zip(pairs, prompts, completions):
            built = assemble_sft(
                p_ids, c_ids, bos_id=bos, eos_id=tok.eos_id, max_length=self.max_length, truncation=self.truncation
            )
            self._set_tokens(d, built)


RENDER_ONCE = "render once"  # how a chat step finds its trained text (the step's ``masks``)


@dataclass(frozen=True, kw_only=True)
class ChatStep(_SupervisedStep):
    """Render chat records with a Jinja template and tokenize each conversation whole, once,
    as ``apply_chat_template(..., tokenize=True)`` does; the trained text is what the
    template's ``{% generation %}`` blocks mark, else each assistant message from its
    generation prompt through its end-of-turn text (``beamtok._src.transforms.chat_spans``).

    ``bos`` puts the BOS token first where the rendered text does not start with it; ``eos``
    puts EOS after each assistant turn that does not already hold it. Both are off by
    default: the template writes what the model sees at inference."""

    OP = "tokenize_chat"

    template: str
    messages: str
    eos: bool
    template_kwargs: dict[str, Any] = field(default_factory=dict, hash=False)
    special_tokens: dict[str, str] = field(default_factory=dict, hash=False)
    date: str | None = None
    masks: str = RENDER_ONCE

    @property
    def chat_template(self) -> str:
        return self.template

    @property
    def adds_eos(self) -> bool:
        return self.eos

    def renderer(self) -> ChatRenderer:
        """The template with everything this step renders it with."""
        return ChatRenderer(self.template, self.special_tokens, self.template_kwargs, self.date)

    def render_key(self) -> str:
        """Names the renderer: steps with equal keys render alike."""
        return json.dumps([self.template, self.template_kwargs, self.special_tokens, self.date], sort_keys=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        if isinstance(data, dict) and "eos" not in data:
            raise ConfigError(
                "this tokenize_chat step was made by a beamtok that tokenized chat turns apart and added an EOS after each "
                "assistant turn, even where the template wrote one: its examples are not the ones apply_chat_template gives, "
                "which this beamtok makes; rebuild the cache (or start the run anew)"
            )
        if isinstance(data, dict) and "masks" not in data:  # found its trained text by rendering each prefix
            data = {**data, "template_kwargs": {}, "special_tokens": {}, "date": None, "masks": "prefix renders"}
        return super().from_json(data)

    def apply(self, docs: list[Doc], ctx: StepContext) -> None:
        if self.masks != RENDER_ONCE:
            raise ConfigError(
                "this tokenize_chat step was made by a beamtok that found the trained turns by rendering each prefix of a "
                "conversation; this one renders it once and reads the template's own markers: rebuild the cache"
            )
        trained, tokenized_chats = ctx.chat(self)
        convs: list[tuple[Doc, str, list[tuple[int, int]]]] = []
        for d in docs:
            messages = d.record.get(self.messages, MISSING)
            if messages is MISSING:
                ctx.fail_missing(d, self.messages)
                continue
            if not _is_conversation(messages):
                ctx.fail(
                    d,
                    SkipReason.WRONG_TYPE,
                    f"field {self.messages!r} must be a list of messages, each an object with a string 'role'",
                )
                continue
            try:
                text, spans = trained(messages)
            except Exception as e:  # a template can raise anything Jinja raises; the record is at fault
                ctx.fail(d, SkipReason.TEMPLATE_ERROR, f"chat template failed: {type(e).__name__}: {e}")
                continue
            if not any(end > start for start, end in spans):
                if any(m.get("role") == "assistant" for m in messages):
                    ctx.fail(d, SkipReason.TEMPLATE_ERROR, "the template marks no text of its assistant messages")
                else:
                    d.skip = SkipReason.EMPTY  # nothing to learn: no assistant turn
                continue
            problem = unencodable(text)
            if problem is not None:
                ctx.fail(d, SkipReason.INVALID_UTF8, f"field {self.messages!r}: {problem}")
                continue
            convs.append((d, text, spans))
        tok = ctx.tokenizer(self.tokenizer)
        bos = tok.bos_id if self.bos else None
        eos = tok.eos_id if self.eos else None
        tokenized = tokenized_chats([(text, spans) for _, text, spans in convs])
        for (d, _, _), (ids, mask) in zip(convs, tokenized):
            built = assemble_chat(
                ids, mask, bos_id=bos, eos_id=eos, max_length=self.max_length, truncation=self.truncation
            )
            self._set_tokens(d, built)


def _is_conversation(messages: Any) -> bool:
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
    )

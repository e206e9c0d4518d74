"""The per-document steps of supervised data: prompt/completion pairs (``tokenize_sft``) and
conversations through a chat template (``tokenize_chat``), each giving token ids with a loss
mask over what the model is trained to write."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok.base.errors import ConfigError
from beamtok.base.sizes import MAX_SEQ_LEN, ROW_BYTES_PER_TOKEN, check_ceiling
from beamtok.base.validate import check_choice, check_optional_int
from beamtok.core.steps import MISSING, TRUNCATION_POLICIES, Doc, Step, StepContext, unencodable
from beamtok.sources.documents import SkipReason
from beamtok.transforms.sft import TokenDoc, assemble_chat, assemble_sft, chat_mask_from_offsets
from beamtok.transforms.tokenize import Tokenizer, TokenizerRef

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


@dataclass(frozen=True, kw_only=True)
class ChatStep(_SupervisedStep):
    """Render chat records with a Jinja template and tokenize each conversation whole, as
    ``apply_chat_template(..., tokenize=True)`` does; only assistant turns are trained.

    ``bos`` puts the BOS token first where the rendered text does not start with it; ``eos``
    puts EOS after each assistant turn that does not already hold it. Both are off by
    default: the template writes what the model sees at inference."""

    OP = "tokenize_chat"

    template: str
    messages: str
    eos: bool

    @property
    def chat_template(self) -> str:
        return self.template

    @property
    def adds_eos(self) -> bool:
        return self.eos

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        if isinstance(data, dict) and "eos" not in data:
            raise ConfigError(
                "this tokenize_chat step was made by a beamtok that tokenized chat turns apart and added an EOS after each "
                "assistant turn, even where the template wrote one: its examples are not the ones apply_chat_template gives, "
                "which this beamtok makes; rebuild the cache (or start the run anew)"
            )
        return super().from_json(data)

    def apply(self, docs: list[Doc], ctx: StepContext) -> None:
        template = ctx.template(self.template)
        convs: list[tuple[Doc, list[tuple[str, bool]]]] = []
        for d in docs:
            messages = d.record.get(self.messages, MISSING)
            if messages is MISSING:
                ctx.fail_missing(d, self.messages)
                continue
            if not _is_conversation(messages):
                ctx.fail(
                    d,
                    SkipReason.WRONG_TYPE,
                    f"field {self.messages!r} must be a list of {{role, content}} objects with string values",
                )
                continue
            try:
                segments = template.segments(messages)
            except Exception as e:  # a template can raise anything Jinja raises; the record is at fault
                ctx.fail(d, SkipReason.TEMPLATE_ERROR, f"chat template failed: {type(e).__name__}: {e}")
                continue
            if not any(train for _, train in segments):
                d.skip = SkipReason.EMPTY  # nothing to learn: no assistant turn
                continue
            problem = next((p for p in (unencodable(text) for text, _ in segments) if p is not None), None)
            if problem is not None:
                ctx.fail(d, SkipReason.INVALID_UTF8, f"field {self.messages!r}: {problem}")
                continue
            convs.append((d, segments))
        tok = ctx.tokenizer(self.tokenizer)
        wholes = tok.encode_batch(["".join(text for text, _ in segs) for _, segs in convs], add_special_tokens=False)
        pieces = iter(tok.encode_batch([text for _, segs in convs for text, _ in segs], add_special_tokens=False))
        bos = tok.bos_id if self.bos else None
        eos = tok.eos_id if self.eos else None
        for (d, segs), whole in zip(convs, wholes):
            mask = _chat_mask(tok, segs, [next(pieces) for _ in segs], whole)
            built = assemble_chat(
                whole, mask, bos_id=bos, eos_id=eos, max_length=self.max_length, truncation=self.truncation
            )
            self._set_tokens(d, built)


def _chat_mask(
    tok: Tokenizer, segments: list[tuple[str, bool]], pieces: list[np.ndarray], whole: np.ndarray
) -> np.ndarray:
    """The loss mask of a conversation tokenized whole (``whole``). Where its turns tokenized
    apart (``pieces``) give the same ids, the turns' edges are token edges and the mask follows
    them; where a token merges text across an edge, each token's character span decides
    (:func:`~beamtok.transforms.sft.chat_mask_from_offsets`)."""
    if sum(len(p) for p in pieces) == len(whole) and np.array_equal(np.concatenate(pieces), whole):
        return np.concatenate([np.full(len(p), int(train), np.int8) for p, (_, train) in zip(pieces, segments)])
    text = "".join(t for t, _ in segments)
    encoding = tok.backend.encode(text, add_special_tokens=False)
    if encoding.ids != whole.tolist():  # the fast path is exact; a difference is a bug to be seen, not masked over
        raise AssertionError(
            f"tokenizer {tok.name!r}: the fast path and tokenizers disagree on a rendered conversation"
        )
    spans, at = [], 0
    for t, train in segments:
        if train:
            spans.append((at, at + len(t)))
        at += len(t)
    return chat_mask_from_offsets(encoding.offsets, spans)


def _is_conversation(messages: Any) -> bool:
    return isinstance(messages, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
    )

"""Supervised fine-tuning examples: token ids plus a loss mask, exact at token boundaries.

Prompt and completion are tokenized separately and joined, so the mask boundary is always a
token boundary, even where tokenizing the joined text would merge the last prompt characters
and the first completion characters into one token. Chat records are rendered with a Jinja
template turn by turn; the text each assistant turn adds (after its generation prompt) is the
trained part, and everything else (system, user, tool turns, role headers) is masked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from beamtok.base.errors import ConfigError

__all__ = ["ChatTemplate", "TokenDoc", "assemble_chat", "assemble_sft", "load_template_source", "truncate_to"]


class TokenDoc(NamedTuple):
    """A tokenized document: ids, and a per-token loss mask (None: every token is trained)."""

    ids: np.ndarray
    mask: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)


def assemble_sft(
    prompt: np.ndarray,
    completion: np.ndarray,
    *,
    bos_id: int | None,
    eos_id: int,
    max_length: int | None,
    truncation: str,
) -> tuple[TokenDoc, bool] | None:
    """``[BOS] prompt completion EOS`` with the loss on completion and EOS only.

    Too long for ``max_length``: ``completion_tail`` cuts the completion's end (and its EOS, as
    the text no longer ends there), ``prompt_head`` cuts the prompt's beginning, ``drop``
    returns None; so does a policy that cannot keep one trained token. The flag says whether
    anything was cut.
    """
    head = [bos_id] if bos_id is not None else []
    eos = [eos_id]
    truncated = False
    if max_length is not None and len(head) + len(prompt) + len(completion) + 1 > max_length:
        truncated = True
        if truncation == "completion_tail":
            room = max_length - len(head) - len(prompt)
            if room < 1:
                return None
            completion, eos = completion[:room], []
        elif truncation == "prompt_head":
            room = max_length - len(head) - len(completion) - 1
            if room < 0:
                return None
            prompt = prompt[len(prompt) - room :]
        else:
            return None
    ids = np.concatenate([np.asarray(head, np.int32), prompt, completion, np.asarray(eos, np.int32)]).astype(np.int32)
    mask = np.zeros(len(ids), dtype=np.int8)
    mask[len(head) + len(prompt) :] = 1
    return TokenDoc(ids, mask), truncated


def assemble_chat(
    segments: Sequence[np.ndarray],
    trained: Sequence[bool],
    *,
    bos_id: int | None,
    eos_id: int,
    max_length: int | None,
    truncation: str,
) -> tuple[TokenDoc, bool] | None:
    """Join rendered chat segments; trained (assistant) segments are followed by EOS.

    Too long: ``completion_tail`` keeps the start, ``prompt_head`` keeps the end, ``drop``
    returns None; so does a cut that leaves no trained token.
    """
    parts: list[np.ndarray] = [np.asarray([bos_id], np.int32)] if bos_id is not None else []
    masks: list[np.ndarray] = [np.zeros(1, np.int8)] if bos_id is not None else []
    for ids, train in zip(segments, trained):
        parts.append(ids)
        masks.append(np.full(len(ids), int(train), np.int8))
        if train:
            parts.append(np.asarray([eos_id], np.int32))
            masks.append(np.ones(1, np.int8))
    ids = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
    mask = np.concatenate(masks) if masks else np.zeros(0, np.int8)
    doc, truncated = truncate_to(TokenDoc(ids, mask), max_length, truncation)
    if doc is None or doc.mask is None or not doc.mask.any():
        return None
    return doc, truncated


def truncate_to(doc: TokenDoc, max_length: int | None, truncation: str) -> tuple[TokenDoc | None, bool]:
    """Cut a token document to ``max_length`` by a truncation policy (None: dropped)."""
    if max_length is None or len(doc.ids) <= max_length:
        return doc, False
    if truncation == "drop":
        return None, True
    cut = slice(None, max_length) if truncation == "completion_tail" else slice(len(doc.ids) - max_length, None)
    return TokenDoc(doc.ids[cut], doc.mask[cut] if doc.mask is not None else None), True


class NoChatTemplate(ConfigError):
    """The tokenizer has no chat template and none was given."""

    def __init__(self, tokenizer_name: str, option: str = "template= (a Jinja file or string)") -> None:
        super().__init__(f"tokenizer {tokenizer_name!r} has no chat template; pass {option}")
        self.tokenizer_name = tokenizer_name


def load_template_source(template: str | None, tokenizer_template: str | None, tokenizer_name: str) -> str:
    """A chat template from a file path, a template string, or the tokenizer's own."""
    if template is None:
        if not tokenizer_template:
            raise NoChatTemplate(tokenizer_name)
        return tokenizer_template
    if "{" not in template and os.path.isfile(template):
        with open(template, encoding="utf-8") as f:
            return f.read()
    if "{" not in template:
        raise ConfigError(f"chat template {template!r} is neither a file nor a Jinja template string")
    return template


class ChatTemplate:
    """A sandboxed Jinja chat template that splits a conversation into trained/untrained text."""

    def __init__(self, source: str, bos_token: str, eos_token: str) -> None:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
        try:
            self.template = env.from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise ConfigError(f"chat template does not parse: {e}") from e
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = False) -> str:
        return str(
            self.template.render(
                messages=list(messages),
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        )

    def segments(self, messages: Sequence[dict[str, Any]]) -> list[tuple[str, bool]]:
        """The conversation's text in pieces, each marked trained (assistant content) or not.

        Raises ValueError when the template does not render conversations as extensions of
        their prefixes, which turn-by-turn masking needs.
        """
        out: list[tuple[str, bool]] = []
        done = ""
        for i, message in enumerate(messages):
            if message["role"] == "assistant":
                prompt = self.render(messages[:i], add_generation_prompt=True)
                full = self.render(messages[: i + 1])
                if not (prompt.startswith(done) and full.startswith(prompt)):
                    raise ValueError(f"the template does not render turn {i} as an extension of the turns before it")
                out.append((prompt[len(done) :], False))
                out.append((full[len(prompt) :], True))
            else:
                full = self.render(messages[: i + 1])
                if not full.startswith(done):
                    raise ValueError(f"the template does not render turn {i} as an extension of the turns before it")
                out.append((full[len(done) :], False))
            done = full
        return [(text, train) for text, train in out if text]

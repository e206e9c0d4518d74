"""Supervised fine-tuning examples: token ids plus a loss mask, exact at token boundaries.

Prompt and completion are tokenized separately and joined, so the mask boundary is always a
token boundary, even where tokenizing the joined text would merge the last prompt characters
and the first completion characters into one token. Chat records are rendered with a Jinja
template as ``transformers``' ``apply_chat_template`` renders them and tokenized whole, so
their ids are the ones the model sees at inference; rendering turn by turn finds the text each
assistant turn adds (after its generation prompt), which is the trained part, and everything
else (system, user, tool turns, role headers) is masked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from beamtok.base.errors import ConfigError

__all__ = [
    "ChatTemplate",
    "TokenDoc",
    "assemble_chat",
    "assemble_sft",
    "chat_mask_from_offsets",
    "compile_chat_template",
    "load_template_source",
    "truncate_to",
]


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
    ids: np.ndarray,
    mask: np.ndarray,
    *,
    bos_id: int | None,
    eos_id: int | None,
    max_length: int | None,
    truncation: str,
) -> tuple[TokenDoc, bool] | None:
    """A rendered conversation's ids and loss mask (1 on assistant turns), with beamtok's own
    additions where asked: ``bos_id`` is put first unless the text already starts with it;
    ``eos_id`` is put after each assistant turn (each run of trained tokens) that does not
    already hold it. Neither is added by default: the template writes what the model sees.

    Too long: ``completion_tail`` keeps the start, ``prompt_head`` keeps the end, ``drop``
    returns None; so does a cut that leaves no trained token.
    """
    ids = np.asarray(ids, np.int32)
    mask = np.asarray(mask, np.int8)
    if eos_id is not None and len(ids):
        edges = np.flatnonzero(np.diff(np.r_[0, mask, 0]))  # [start, stop) of every trained run
        parts_ids: list[np.ndarray] = []
        parts_mask: list[np.ndarray] = []
        done = 0
        for start, stop in zip(edges[::2].tolist(), edges[1::2].tolist()):
            if eos_id in ids[start:stop]:
                continue
            parts_ids += [ids[done:stop], np.asarray([eos_id], np.int32)]
            parts_mask += [mask[done:stop], np.ones(1, np.int8)]
            done = stop
        ids = np.concatenate([*parts_ids, ids[done:]])
        mask = np.concatenate([*parts_mask, mask[done:]])
    if bos_id is not None and (not len(ids) or ids[0] != bos_id):
        ids = np.concatenate([np.asarray([bos_id], np.int32), ids])
        mask = np.concatenate([np.zeros(1, np.int8), mask])
    doc, truncated = truncate_to(TokenDoc(ids.astype(np.int32), mask.astype(np.int8)), max_length, truncation)
    if doc is None or doc.mask is None or not doc.mask.any():
        return None
    return doc, truncated


def chat_mask_from_offsets(offsets: Sequence[tuple[int, int]], trained: Sequence[tuple[int, int]]) -> np.ndarray:
    """The loss mask of a conversation tokenized whole, from each token's character span and
    the character spans of the assistant turns: a token is trained where its span meets a
    turn's, so a token that straddles a turn's edge (text merged across it) is trained, as
    ``transformers`` marks the tokens holding a turn's first and last characters. A token whose
    span was trimmed to nothing (whitespace, byte-level ``trim_offsets``) is trained when its
    place lies inside a turn."""
    mask = np.zeros(len(offsets), np.int8)
    for i, (s, e) in enumerate(offsets):
        for a, b in trained:
            if (s < b and a < e) if e > s else (a <= s < b):
                mask[i] = 1
                break
    return mask


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
    """A chat template rendered as ``transformers`` renders it, split into trained and
    untrained text.

    The environment is the one ``apply_chat_template`` gives a template: a sandbox with
    ``trim_blocks`` and ``lstrip_blocks``, loop controls, ``tojson`` without HTML escaping,
    ``raise_exception`` and ``strftime_now``, ``{% generation %}`` blocks accepted, undefined
    names rendering as nothing, and ``tools``/``documents`` set to none beside the tokenizer's
    BOS and EOS tokens."""

    def __init__(self, source: str, bos_token: str, eos_token: str) -> None:
        self.template = compile_chat_template(source)
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = False) -> str:
        tokens = {
            name: value for name, value in (("bos_token", self.bos_token), ("eos_token", self.eos_token)) if value
        }
        return str(
            self.template.render(
                messages=list(messages),
                tools=None,
                documents=None,
                add_generation_prompt=add_generation_prompt,
                **tokens,
            )
        )

    def segments(self, messages: Sequence[dict[str, Any]]) -> list[tuple[str, bool]]:
        """The conversation's text in pieces, each marked trained (what an assistant turn adds
        after its generation prompt) or not; joined, they are the whole conversation as
        ``apply_chat_template`` renders it.

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


def compile_chat_template(source: str) -> Any:
    """``source`` compiled in the environment ``transformers`` renders chat templates in."""
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlocks(Extension):
        """``{% generation %}...{% endgeneration %}`` (transformers' assistant-mask marker)
        renders its body; beamtok finds assistant text by rendering turn by turn."""

        tags = {"generation"}  # noqa: RUF012 (jinja2 declares it a set on Extension)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body).set_lineno(lineno)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(form: str) -> str:
        return datetime.now().strftime(form)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlocks, loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        return env.from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise ConfigError(f"chat template does not parse: {e}") from e

"""Supervised fine-tuning examples: token ids plus a loss mask, exact at token boundaries.

Prompt and completion are tokenized separately and joined, so the mask boundary is always a
token boundary, even where tokenizing the joined text would merge the last prompt characters
and the first completion characters into one token. A chat record is rendered once and
tokenized whole (``beamtok._src.transforms.chat_render``, ``beamtok._src.transforms.chat_spans``); its
ids and mask are put together here with beamtok's own BOS and EOS, where asked.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from beamtok._src.base.errors import ConfigError

__all__ = ["NoChatTemplate", "TokenDoc", "assemble_chat", "assemble_sft", "load_template_source", "truncate_to"]


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

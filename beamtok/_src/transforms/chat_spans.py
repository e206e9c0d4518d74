"""Which characters of a rendered conversation are trained, for a template without
``{% generation %}`` markers, and which tokens that makes.

The convention, the same for every template: an assistant message is trained from the end
of the generation prompt that opens it (when the template writes it there; else from its
first rendered character) through its end-of-turn text and the whitespace after that. Its
text is found where it lands in the rendered string, message by message with a cursor that
only moves forward: reasoning, content and tool calls, as given or stripped (templates
``trim`` them), and content after its last ``</think>`` (DeepSeek's templates keep only
that). A message the template rewrote beyond that cannot be found, and is refused by name;
reasoning the template drops from earlier turns (Qwen3, gpt-oss, DeepSeek) is simply not
there, and what the rendered text holds of the turn is trained.

What a template writes around a turn is probed once, with made-up messages: the generation
prompt is what ``add_generation_prompt`` appends, and the end-of-turn strings are the added
tokens it writes right after a message's text (``<|im_end|>``, ``<|eot_id|>``, ``<|end|>``,
``<|return|>``...) and the tokenizer's EOS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.transforms.chat_render import ChatRenderer, prepare_messages

__all__ = ["TrainedText", "TurnShape", "assistant_spans", "mask_from_spans", "probe_turn_shape"]

PROBE_QUESTION = "beamtok probes the question"
PROBE_ANSWER = "beamtok probes the answer"


@dataclass(frozen=True)
class TurnShape:
    """What a template writes around an assistant turn.

    Attributes:
        generation_prompt: The text ``add_generation_prompt`` appends ("" when unknown).
        closers: End-of-turn strings, longest first.
    """

    generation_prompt: str
    closers: tuple[str, ...]


class TrainedText:
    """A template's trained text of each conversation: its ``{% generation %}`` blocks where
    it has them, else the convention above."""

    def __init__(self, renderer: ChatRenderer, added_tokens: Sequence[str], eos_token: str) -> None:
        """Probe the template's turn shape once (a tagged template needs none).

        Args:
            renderer: The template with what it is rendered with.
            added_tokens: The tokenizer's added tokens.
            eos_token: The tokenizer's EOS ("" for none).
        """
        self.renderer = renderer
        self.shape = None if renderer.tagged else probe_turn_shape(renderer, added_tokens, eos_token)

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[tuple[int, int]]]:
        """The conversation rendered once, and the character spans to train.

        Args:
            messages: The conversation.
        Returns:
            ``(text, spans)``.
        Raises:
            ValueError: An assistant message cannot be found in an untagged template's text.
        """
        prepared = prepare_messages(messages)
        rendered = self.renderer.render_prepared(prepared)
        if rendered.spans is not None:
            return rendered.text, rendered.spans
        assert self.shape is not None
        return rendered.text, assistant_spans(rendered.text, prepared, self.shape)


def probe_turn_shape(renderer: ChatRenderer, added_tokens: Sequence[str], eos_token: str) -> TurnShape:
    """Render made-up conversations once to learn the turn's generation prompt and closers.

    Args:
        renderer: The template with what it is rendered with.
        added_tokens: The tokenizer's added tokens (where closers are looked for).
        eos_token: The tokenizer's EOS ("" for none).
    Returns:
        The shape.
    """
    question = {"role": "user", "content": PROBE_QUESTION}
    answer = {"role": "assistant", "content": PROBE_ANSWER}
    prompt = ""
    closers = {eos_token} if eos_token else set()
    tokens = sorted((t for t in added_tokens if t), key=len, reverse=True)
    try:
        plain = renderer.render([question]).text
        prompted = renderer.render([question], add_generation_prompt=True).text
        prompt = prompted[len(plain) :] if prompted.startswith(plain) else ""
        closers.update(_closers_after(plain, PROBE_QUESTION, tokens))
    except Exception:  # a template may refuse a lone user turn; the other probe may still teach
        pass
    try:
        closers.update(_closers_after(renderer.render([question, answer]).text, PROBE_ANSWER, tokens))
    except Exception:
        pass
    return TurnShape(prompt, tuple(sorted(closers, key=len, reverse=True)))


def _closers_after(text: str, marker: str, tokens: Sequence[str]) -> set[str]:
    """The added tokens written right after ``marker``'s last place (whitespace between)."""
    at = text.rfind(marker)
    if at < 0:
        return set()
    at += len(marker)
    found: set[str] = set()
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        token = next((t for t in tokens if text.startswith(t, at)), None)
        if token is None:
            return found
        found.add(token)
        at += len(token)


def assistant_spans(text: str, messages: Sequence[Mapping[str, Any]], shape: TurnShape) -> list[tuple[int, int]]:
    """The character spans of ``text`` (``messages`` rendered) to train, one an assistant
    message that has text (see the module docstring).

    Args:
        text: The rendered conversation.
        messages: The conversation as the template saw it (:func:`~beamtok._src.transforms.chat_render.prepare_messages`).
        shape: The template's turn shape.
    Returns:
        Spans, in order.
    Raises:
        ValueError: An assistant message's text is nowhere in the rendered text.
    """
    placed: list[tuple[int, int] | None] = []
    cursor = 0
    for number, message in enumerate(messages):
        fields = _fields(message)
        found = [where for where in (_find(text, field, cursor) for field in fields) if where is not None]
        if found:
            placed.append((min(s for s, _ in found), max(e for _, e in found)))
            cursor = max(e for _, e in found)
        elif message.get("role") == "assistant" and _content(message).strip():
            raise ValueError(
                f"assistant message {number}: its content is not in the rendered conversation (the template "
                "rewrote it); use a template that marks the trained text with {% generation %} "
                "(TRL ships one for many models)"
            )
        else:
            placed.append(None)
    spans = []
    for number, message in enumerate(messages):
        where = placed[number]
        if message.get("role") != "assistant" or where is None:
            continue
        before = max((p[1] for p in placed[:number] if p is not None), default=0)
        after = min((p[0] for p in placed[number + 1 :] if p is not None), default=len(text))
        start, end = where
        opened = text.rfind(shape.generation_prompt, before, start) if shape.generation_prompt else -1
        if opened >= 0:
            start = opened + len(shape.generation_prompt)
        spans.append((start, _closed(text, end, after, shape.closers)))
    return spans


def _fields(message: Mapping[str, Any]) -> list[str]:
    """The texts of a message a template renders: reasoning, content (or its text parts),
    and each tool call's name and arguments; blank ones left out."""
    texts: list[str] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        texts.append(reasoning)
    content = message.get("content")
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        texts += [part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
    for call in message.get("tool_calls") or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        if isinstance(function, dict):
            name = function.get("name")
            texts.append(name if isinstance(name, str) else "")
            arguments = function.get("arguments")
            texts.append(arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False))
    return [t for t in texts if t.strip()]


def _content(message: Mapping[str, Any]) -> str:
    """A message's content as text (the text parts of a list)."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return content if isinstance(content, str) else ""


def _find(text: str, field: str, cursor: int) -> tuple[int, int] | None:
    """Where ``field`` lands in ``text`` from ``cursor`` on: as given, stripped, or (content
    with reasoning inline) after its last ``</think>``."""
    variants = [field, field.strip()]
    if "</think>" in field:
        variants.append(field.split("</think>")[-1].strip())
    for variant in variants:
        if variant:
            at = text.find(variant, cursor)
            if at >= 0:
                return at, at + len(variant)
    return None


def _closed(text: str, end: int, limit: int, closers: Sequence[str]) -> int:
    """``end`` moved through the turn's end-of-turn text: to the first closer before
    ``limit`` (the next message's text), then over the run of closers and whitespace after
    it; ``end`` itself when no closer comes before ``limit``."""
    first = min((at for at in (text.find(c, end, limit) for c in closers) if at >= 0), default=-1)
    if first < 0:
        return end
    at = first
    while True:
        token = next((c for c in closers if text.startswith(c, at) and at + len(c) <= limit), None)
        if token is None:
            return at
        at += len(token)
        while at < limit and text[at].isspace():
            at += 1


def mask_from_spans(offsets: Sequence[tuple[int, int]] | np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """The loss mask of a conversation tokenized whole: a token is trained when its character
    span ends after a trained span's start and starts before its end (the rule
    ``transformers``' ``assistant_masks`` follows, so a token straddling an edge is trained).

    Args:
        offsets: Each token's ``(start, end)`` characters.
        spans: Trained ``(start, end)`` characters, in order, not overlapping.
    Returns:
        One int8 a token.
    """
    if not len(offsets) or not len(spans):
        return np.zeros(len(offsets), np.int8)
    bounds = np.asarray(offsets, np.int64).reshape(-1, 2)
    starts = np.asarray([s for s, _ in spans], np.int64)
    ends = np.asarray([e for _, e in spans], np.int64)
    # the first span ending after the token starts (the furthest start so far: the walk never goes back)
    k = np.searchsorted(ends, np.maximum.accumulate(bounds[:, 0]), side="right")
    inside = k < len(spans)
    mask = np.zeros(len(bounds), np.int8)
    mask[inside] = bounds[inside, 1] > starts[k[inside]]
    return mask

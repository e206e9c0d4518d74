"""Render a conversation once, as ``transformers``' ``apply_chat_template`` renders it, and
find the character spans the template marks with ``{% generation %}``.

What the template sees is what ``transformers`` 5 gives it: message keys whose value is null
(an Arrow row carries every column) are dropped, reasoning is copied across
``reasoning_content``, ``thinking`` and ``reasoning``, every special token of the tokenizer
(``bos_token``, ``eos_token``, ...) is a variable, and the caller's template keyword arguments
(``enable_thinking``, ``reasoning_effort``, ``tools``, ...) are passed on. The environment is
the sandbox it renders in: ``trim_blocks``, ``lstrip_blocks``, loop controls, ``tojson``
without HTML escaping, ``raise_exception`` and ``strftime_now`` (pinned to a date where one is
given, so a cache built today and a stream read tomorrow render alike).

A ``{% generation %}`` block renders its body between two private-use sentinel characters;
the sentinels are taken out of the text and their places are the block's character span.
``transformers`` counts the characters rendered before each block instead; the two agree
wherever the block's text reaches the output as rendered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from beamtok._src.base.errors import ConfigError

__all__ = ["ChatRenderer", "Rendered", "has_generation_blocks", "json_kwargs", "prepare_messages"]

SPAN_START = "\U000f0000"  # private use: never in a tokenizer's vocabulary, never written by a template
SPAN_END = "\U000f0001"
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
TEMPLATE_ARGUMENTS = ("messages", "add_generation_prompt")
_SENTINEL = re.compile(f"[{SPAN_START}{SPAN_END}]")


@dataclass(frozen=True)
class Rendered:
    """A rendered conversation: its text, and the character spans of its ``{% generation %}``
    blocks (None for a template that has none)."""

    text: str
    spans: list[tuple[int, int]] | None


def has_generation_blocks(source: str) -> bool:
    """Whether the template marks what is trained with ``{% generation %}``."""
    return re.search(r"\{%-?\s*generation\s*-?%\}", source) is not None


def json_kwargs(kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """Template keyword arguments as JSON (they are part of a step's fingerprint and travel
    to Beam workers).

    Args:
        kwargs: Names to values, or None.
    Returns:
        A JSON copy.
    Raises:
        ConfigError: Not a mapping of names to JSON values.
    """
    if kwargs is None:
        return {}
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise ConfigError(f"template_kwargs must map names to values, got {kwargs!r}")
    try:
        return dict(json.loads(json.dumps(dict(kwargs), allow_nan=False)))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"template_kwargs must be JSON values (numbers, strings, lists, objects): {e}") from None


def prepare_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as the template sees them: null-valued keys dropped, reasoning copied
    under each of its names.

    Args:
        messages: The conversation, as read from a record.
    Returns:
        New message dicts (the record is not changed).
    """
    prepared = []
    for message in messages:
        kept = {key: value for key, value in message.items() if value is not None}
        reasoning = next((kept[key] for key in REASONING_FIELDS if kept.get(key) is not None), None)
        if reasoning is not None:
            kept = {"thinking": reasoning, **kept, "reasoning_content": reasoning}
        prepared.append(kept)
    return prepared


class ChatRenderer:
    """A chat template with everything it is rendered with: the tokenizer's special tokens,
    the caller's keyword arguments and the date ``strftime_now`` gives."""

    def __init__(
        self,
        source: str,
        special_tokens: Mapping[str, str],
        template_kwargs: Mapping[str, Any] | None = None,
        date: str | None = None,
    ) -> None:
        """Compile ``source``; a template that does not parse is a ``ConfigError``.

        Args:
            source: The Jinja template.
            special_tokens: The tokenizer's special tokens by name (``bos_token``...).
            template_kwargs: More variables for the template (they override special tokens).
            date: ``YYYY-MM-DD`` for ``strftime_now``; None: the day of rendering.
        """
        self.source = source
        self.tagged = has_generation_blocks(source)
        self.variables: dict[str, Any] = {**special_tokens, **(template_kwargs or {})}
        clash = sorted(set(self.variables) & set(TEMPLATE_ARGUMENTS))
        if clash:
            raise ConfigError(f"template_kwargs: {clash} are set by beamtok for each conversation")
        self.date = _parse_date(date)
        self.template = _compile(source, self.date)

    def render(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = False) -> Rendered:
        """The conversation's text, and its generation blocks' spans.

        Args:
            messages: The conversation, as read from a record (it is prepared here).
            add_generation_prompt: End with the header of an assistant turn.
        Returns:
            The rendered text and spans.
        Raises:
            ValueError: A message holds one of the sentinel characters.
        """
        return self.render_prepared(prepare_messages(messages), add_generation_prompt)

    def render_prepared(self, prepared: list[dict[str, Any]], add_generation_prompt: bool = False) -> Rendered:
        """:meth:`render` of messages :func:`prepare_messages` already prepared.

        Args:
            prepared: The conversation as the template sees it.
            add_generation_prompt: End with the header of an assistant turn.
        Returns:
            The rendered text and spans.
        """
        marked = str(
            self.template.render(messages=prepared, add_generation_prompt=add_generation_prompt, **self.variables)
        )
        if SPAN_START not in marked and SPAN_END not in marked:
            return Rendered(marked, [] if self.tagged else None)
        if any(SPAN_START in json.dumps(m) or SPAN_END in json.dumps(m) for m in prepared):
            raise ValueError("a message holds U+F0000 or U+F0001, which beamtok reserves to mark trained text")
        return _unmarked(marked)


def _unmarked(marked: str) -> Rendered:
    """The text without sentinels, and the spans between the outermost pairs of them."""
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    at = length = depth = start = 0
    for index in (found.start() for found in _SENTINEL.finditer(marked)):
        pieces.append(marked[at:index])
        length += index - at
        if marked[index] == SPAN_START:
            if depth == 0:
                start = length
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:  # an empty block is kept: transformers trains a token that straddles its place
                spans.append((start, length))
        at = index + 1
    pieces.append(marked[at:])
    return Rendered("".join(pieces), spans)


def _parse_date(date: str | None) -> datetime | None:
    if date is None:
        return None
    try:
        return datetime.strptime(date, "%Y-%m-%d")
    except (TypeError, ValueError):
        raise ConfigError(f"date must be YYYY-MM-DD (the day strftime_now gives the template), got {date!r}") from None


def _compile(source: str, date: datetime | None) -> Any:
    """``source`` compiled in the environment ``transformers`` renders chat templates in."""
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlocks(Extension):
        """``{% generation %}...{% endgeneration %}``: the body, between the span sentinels."""

        tags = {"generation"}  # noqa: RUF012 (jinja2 declares it a set on Extension)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            mark = jinja2.nodes.Output
            return [
                mark([jinja2.nodes.TemplateData(SPAN_START)]).set_lineno(lineno),
                jinja2.nodes.Scope(body).set_lineno(lineno),
                mark([jinja2.nodes.TemplateData(SPAN_END)]).set_lineno(lineno),
            ]

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
        return (date or datetime.now()).strftime(form)

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

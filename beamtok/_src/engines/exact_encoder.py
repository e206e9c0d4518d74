"""An exact fast-path encoder: an engine that encodes plain text (one of ``engines/``), wrapped
with the file's added-token routing (``added_token_routing``: where the engine knows no added
tokens) and the ids its post-processor puts around a single text (``added_around``: BOS, EOS,
[CLS]...). The wrapper also checks the whole against ``tokenizers`` on probe strings, so every
engine is held to the same test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.added_token_routing import AddedTokenRouting
from beamtok._src.engines.tokenizer_parts import steps_of

__all__ = [
    "ExactEncoder",
    "MissingExtra",
    "OtherForm",
    "PlainEngine",
    "ProbeMismatch",
    "added_around",
]


class ProbeMismatch(ConfigError):
    """An encoder built for a file gave other ids than ``tokenizers`` on its probe strings."""


class OtherForm(ConfigError):
    """An engine that covers other files of the family than this one (another split pattern,
    say): expected, not a failing of the file or the engine."""


class MissingExtra(ConfigError):
    """An engine that needs a package this install does not have: the install's choice, not
    something about the file (``install`` is what to pip install to have it)."""

    def __init__(self, message: str, install: str) -> None:
        super().__init__(message)
        self.install = install


class PlainEngine(Protocol):
    """What an engine gives the wrapper: its name, why a faster engine does not run ("" where
    none was refused), the file as ``tokenizers`` loaded it, the post-processor's ids around a
    text, the routing of texts holding added tokens (None: the engine routes them itself), and
    the ids of texts."""

    engine_name: str
    native_refusal: str
    reference: Any
    prefix: list[int]
    suffix: list[int]
    routing: AddedTokenRouting | None

    def encode_plain(self, texts: list[str]) -> list[np.ndarray]:
        """The ids of each text, without the post-processor's tokens."""
        ...


class ExactEncoder:
    """An engine wrapped with the file's added-token routing and post-processor: the encoder
    the chooser hands out (``Engine``), giving exactly the ids of ``tokenizers``.

    Args:
        engine: The engine.
    """

    def __init__(self, engine: PlainEngine) -> None:
        self.engine = engine

    @property
    def engine_name(self) -> str:
        """Which engine encodes."""
        return self.engine.engine_name

    @property
    def native_refusal(self) -> str:
        """Why a faster engine inside this one does not run ("" where none was refused)."""
        return self.engine.native_refusal

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[np.ndarray]:
        """Token ids of each text; with ``add_special_tokens``, between the tokens the
        post-processor puts around a single text.

        Args:
            texts: The texts.
            add_special_tokens: Put the post-processor's tokens around each.
        """
        engine = self.engine
        routing = engine.routing
        ids = engine.encode_plain(list(texts)) if routing is None else routing.apart(texts, engine.encode_plain)
        if add_special_tokens and (engine.prefix or engine.suffix):
            before = np.asarray(engine.prefix, dtype=np.int32)
            after = np.asarray(engine.suffix, dtype=np.int32)
            return [np.concatenate((before, one, after)) for one in ids]
        return ids

    def check_segments(self, name: str) -> None:
        """Keep the cut at added tokens (``added_segments``) only where the engine gives the
        file's ids on the texts built from them; else texts holding one go to the file whole.

        Args:
            name: The tokenizer's name, for messages.
        """
        routing = self.engine.routing
        if routing is None or routing.segments is None:
            return
        differs = self.first_difference(routing.segments.probe_texts(), special=False)
        if differs:
            routing.segments = None
            routing.segments_refusal = f"cut at its added tokens, {differs}"

    def probe(self, name: str, texts: Sequence[str]) -> None:
        """Refuse unless ``texts`` encode exactly as the file loaded by ``tokenizers`` encodes
        them, with the post-processor's tokens and without.

        Args:
            name: The tokenizer's name, for messages.
            texts: The probe strings.
        """
        for special in (True, False):
            differs = self.first_difference(texts, special)
            if differs:
                raise ProbeMismatch(
                    f"tokenizer {name!r} cannot use the exact fast path ({self.engine_name}): {differs} (tokenizers, add_special_tokens={special})"
                )

    def first_difference(self, texts: Sequence[str], special: bool) -> str:
        """The first of ``texts`` this encoder gives other ids than the file, and both
        beginnings of its ids ("" where none differs).

        Args:
            texts: The texts.
            special: With the post-processor's tokens.
        """
        want = self.engine.reference.encode_batch_fast(list(texts), add_special_tokens=special)
        for text, a, b in zip(texts, want, self.encode_batch(texts, add_special_tokens=special)):
            if a.ids != b.tolist():
                return f"{text[:40]!r} encodes as {b.tolist()[:8]}... instead of {a.ids[:8]}..."
        return ""


def added_around(spec: dict[str, Any], name: str) -> tuple[list[int], list[int]]:
    """The ids the file's post-processor puts before and after a single text's (with
    ``add_special_tokens``); ConfigError naming a post-processor that does anything else."""

    def refuse(why: str) -> ConfigError:
        return ConfigError(f"tokenizer {name!r} cannot use the exact fast path: its post-processor {why}")

    steps = steps_of(spec, "post_processor")
    prefix: list[int] = []
    suffix: list[int] = []
    adding = 0
    for step in steps:
        kind = step.get("type")
        before: list[int] = []
        after: list[int] = []
        if kind == "ByteLevel":
            continue  # offsets only
        if kind in ("BertProcessing", "RobertaProcessing"):
            try:
                before, after = [int(step["cls"][1])], [int(step["sep"][1])]
            except (KeyError, IndexError, TypeError, ValueError) as e:
                raise refuse(f"{kind} has no usable cls/sep ({e})") from None
        elif kind == "TemplateProcessing":
            single = step.get("single") or []
            sequences = [i for i, item in enumerate(single) if "Sequence" in item]
            if len(sequences) != 1 or single[sequences[0]]["Sequence"].get("id") != "A":
                raise refuse("template for a single text does not hold the text once")
            specials = step.get("special_tokens") or {}
            pieces: list[list[int]] = [[], []]
            for i, item in enumerate(single):
                if i == sequences[0]:
                    continue
                token = (item.get("SpecialToken") or {}).get("id")
                if token not in specials:
                    raise refuse(f"template item {item!r} is not a special token it defines")
                pieces[i > sequences[0]] += [int(x) for x in specials[token]["ids"]]
            before, after = pieces
        else:
            raise refuse(f"is {kind}, which beamtok does not reproduce")
        if before or after:
            adding += 1
            if adding > 1:
                raise refuse("is a Sequence in which several processors add tokens")
            prefix, suffix = before, after
    return prefix, suffix

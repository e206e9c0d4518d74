"""Texts that hold an added token, encoded as ``tokenizers`` encodes them, around an engine that
knows no added tokens: found by their exact text (``Needles``), then cut at their added tokens
with the parts given to the engine where that is exact (``added_segments``), else given to the
file itself. ``AddedTokenRouting`` is that part of an exact encoder
(``exact_encoder.ExactEncoder`` wraps an engine with it)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.added_segments import AddedSegments
from beamtok._src.engines.id_arrays import int32_ids

EMPTY = np.zeros(0, dtype=np.int32)

__all__ = [
    "EMPTY",
    "AddedTokenRouting",
    "EitherFound",
    "Needles",
    "TextFinder",
    "refuse_unrouted_added_tokens",
]

EncodePlain = Callable[[list[str]], list[np.ndarray]]  # an engine's encoding of texts holding no added token


class TextFinder(Protocol):
    """Finds the texts an engine must leave to the file itself."""

    def found_in(self, text: str) -> bool: ...


class AddedTokenRouting:
    """Which texts an engine leaves, and how they are encoded: those holding an added token
    (and those ``whole`` finds, which the file encodes whole) are cut at their added tokens
    and the parts encoded by the engine where that is exact, else encoded by the file.

    Args:
        spec: The parsed ``tokenizer.json``.
        tokenizer_json: Its text.
        name: The tokenizer's name, for messages.
        reference: The file as ``tokenizers`` loaded it (loaded here when None).
        routed_too: Texts the file must encode whole besides those holding an added token.
    """

    def __init__(
        self, spec: dict[str, Any], tokenizer_json: str, name: str, reference: Any, routed_too: TextFinder | None = None
    ) -> None:
        if reference is None:
            from tokenizers import Tokenizer as RustTokenizer

            reference = RustTokenizer.from_str(tokenizer_json)
        self.reference = reference
        added = Needles([t["content"] for t in spec.get("added_tokens", [])])
        self.routed: TextFinder = added if routed_too is None else EitherFound(added, routed_too)
        self.whole: TextFinder | None = routed_too  # texts the file encodes whole
        self.segments: AddedSegments | None = None
        self.segments_refusal = AddedSegments.why_not(spec) or ""
        if not self.segments_refusal and spec.get("added_tokens"):
            self.segments = AddedSegments(spec["added_tokens"])

    def route_whole(self, finder: TextFinder) -> None:
        """Texts ``finder`` finds go to the file whole, too.

        Args:
            finder: What finds them.
        """
        self.routed = EitherFound(self.routed, finder)
        self.whole = finder if self.whole is None else EitherFound(self.whole, finder)

    def apart(self, texts: Sequence[str], encode_plain: EncodePlain) -> list[np.ndarray]:
        """Each text's ids: by the engine (``encode_plain``, given the texts in order), but for
        the texts ``routed`` finds, which are encoded together as the file encodes them.

        Args:
            texts: The texts.
            encode_plain: The engine's encoding of texts holding no added token.
        """
        found = self.routed.found_in
        routed = [i for i, text in enumerate(texts) if found(text)]
        if not routed:
            return encode_plain(list(texts))
        apart = set(routed)
        rest = [i for i in range(len(texts)) if i not in apart]
        out: list[np.ndarray] = [EMPTY] * len(texts)
        for i, ids in zip(rest, encode_plain([texts[i] for i in rest])):
            out[i] = ids
        for i, ids in zip(routed, self._encode_routed([texts[i] for i in routed], encode_plain)):
            out[i] = ids
        return out

    def _encode_routed(self, texts: Sequence[str], encode_plain: EncodePlain) -> list[np.ndarray]:
        """``texts`` (each holding an added token, or what ``whole`` finds) encoded as the file
        encodes them: cut at their added tokens, the parts by the engine, where that is exact
        (``added_segments``); else by the file, in one call without offsets."""
        if not texts:
            return []
        segments, whole = self.segments, self.whole
        if segments is None:
            return [int32_ids(e.ids) for e in self.reference.encode_batch_fast(list(texts), add_special_tokens=False)]
        out: list[np.ndarray] = [EMPTY] * len(texts)
        by_file = [i for i, text in enumerate(texts) if whole is not None and whole.found_in(text)]
        for i, ids in zip(
            by_file, self.reference.encode_batch_fast([texts[i] for i in by_file], add_special_tokens=False)
        ):
            out[i] = int32_ids(ids.ids)
        apart = set(by_file)
        cut = {i: segments.parts(text) for i, text in enumerate(texts) if i not in apart}
        between = [part for parts in cut.values() for part in parts[0::2] if part]
        encoded = iter(encode_plain(between))
        token_ids = segments.ids
        for i, parts in cut.items():
            pieces = [
                next(encoded) if k % 2 == 0 else np.array([token_ids[part]], dtype=np.int32)
                for k, part in enumerate(parts)
                if part
            ]
            out[i] = np.concatenate(pieces) if pieces else EMPTY
        return out


class Needles:
    """Whether a text holds any of some strings. They are grouped by their first character:
    a text without it holds none of the group, and a search for one character runs at
    memchr's speed. A text with it is searched with one regex for the group: ``re`` scans
    for a pattern's literal first character before trying the rest, where ``in`` tried
    string after string rescans the text each time (code, where ``<`` and ``[`` are common,
    shows it most). A group of
    one string of 8 characters or more is searched with ``in``, whose search skips ahead by
    up to the string's length. With more than 4 first characters, one regex for them all
    (per group, each common letter would cost a pass of its own)."""

    LONG = 8  # a single string this long is found faster by ``in`` than by ``re``
    MOST_GROUPS = 4

    def __init__(self, strings: Sequence[str]) -> None:
        self.strings = tuple(sorted(set(strings), key=len, reverse=True))
        self.anywhere = "" in self.strings  # the empty string is in every text
        groups: dict[str, list[str]] = {}
        for s in self.strings:
            if s:
                groups.setdefault(s[0], []).append(s)
        self.groups: tuple[tuple[str, Callable[[str], bool] | None], ...] | None = None
        self.regex: re.Pattern[str] | None = None
        if len(groups) > self.MOST_GROUPS:
            self.regex = re.compile("|".join(map(re.escape, self.strings)))
        else:
            self.groups = tuple((first, _group_test(members, self.LONG)) for first, members in sorted(groups.items()))

    @property
    def firsts(self) -> tuple[str, ...] | None:
        """The first characters checked before any search (None: one regex searches)."""
        return None if self.groups is None else tuple(first for first, _ in self.groups)

    def found_in(self, text: str) -> bool:
        if self.anywhere:
            return True
        if self.groups is None:
            return self.regex is not None and self.regex.search(text) is not None
        for first, rest in self.groups:
            if first in text and (rest is None or rest(text)):
                return True
        return False


def _group_test(members: list[str], long: int) -> Callable[[str], bool] | None:
    """Whether a text holding the group's first character holds one of ``members`` (None: the
    group is that character alone)."""
    if len(members) == 1:
        only = members[0]
        if len(only) == 1:
            return None
        if len(only) >= long:
            return lambda text: only in text
    search = re.compile("|".join(map(re.escape, members))).search
    return lambda text: search(text) is not None


class EitherFound:
    """Whether a text holds what either of two finders finds."""

    def __init__(self, first: TextFinder, second: TextFinder) -> None:
        self.first, self.second = first, second

    def found_in(self, text: str) -> bool:
        return self.first.found_in(text) or self.second.found_in(text)


def refuse_unrouted_added_tokens(spec: dict[str, Any], refuse: Callable[[str], ConfigError]) -> None:
    """Raise ``refuse(why)`` for an added token with matching options (strip, single word,
    normalized): the fast paths send texts holding an added token to ``tokenizers``, and find
    them by their exact text only."""
    for added in spec.get("added_tokens", []):
        if added.get("lstrip") or added.get("rstrip") or added.get("single_word") or added.get("normalized"):
            raise refuse(
                f"added token {added['content']!r} has matching options (strip, single word, normalized) beamtok does not route"
            )

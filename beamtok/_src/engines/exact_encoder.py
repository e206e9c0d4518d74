"""What every exact fast-path encoder does with special tokens: put the ids a post-processor
adds around a single text (``added_around``, ``ExactEncoder.encode_batch``), find the texts
that hold an added token (``Needles``) and encode those as ``tokenizers`` does: cut at their
added tokens where that is exact (``added_segments``), else by the file itself."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.added_segments import AddedSegments
from beamtok._src.engines.id_arrays import int32_ids
from beamtok._src.engines.tokenizer_parts import steps_of

EMPTY = np.zeros(0, dtype=np.int32)

__all__ = [
    "EMPTY",
    "EitherFound",
    "ExactEncoder",
    "MissingExtra",
    "Needles",
    "OtherForm",
    "ProbeMismatch",
    "TextFinder",
    "added_around",
    "refuse_unrouted_added_tokens",
]


class TextFinder(Protocol):
    """Finds the texts an engine must leave to the file itself."""

    def found_in(self, text: str) -> bool: ...


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


class ExactEncoder:
    """The base of the fast path's encoders (tiktoken's, kitoken's): the engine encodes a
    text (``_encode_batch``); the ids the post-processor puts around a single text
    (``prefix``, ``suffix``) are added here. ``engine_name`` says which engine encodes,
    ``native_refusal`` why a faster one does not ("" where none was refused)."""

    engine_name: str
    native_refusal: str = ""
    reference: Any  # the file loaded by ``tokenizers``: what the probes compare with, and what encodes routed texts
    _routed: TextFinder  # texts it finds go to ``reference``
    prefix: list[int]
    suffix: list[int]

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[np.ndarray]:
        """Token ids of each text; with ``add_special_tokens``, between the tokens the
        post-processor puts around a single text."""
        ids = self._encode_batch(texts)
        if add_special_tokens and (self.prefix or self.suffix):
            before = np.asarray(self.prefix, dtype=np.int32)
            after = np.asarray(self.suffix, dtype=np.int32)
            return [np.concatenate((before, one, after)) for one in ids]
        return ids

    def _encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        raise NotImplementedError

    def _take_file(
        self, spec: dict[str, Any], tokenizer_json: str, name: str, reference: Any, routed_too: TextFinder | None = None
    ) -> None:
        """What an engine that knows no added tokens keeps of its file: the ids the
        post-processor puts around a text, the file loaded by ``tokenizers`` (the caller's,
        when it has one), and the added tokens, whose texts go to that file (``_routed``), as
        do the texts ``routed_too`` finds."""
        self.prefix, self.suffix = added_around(spec, name)
        if reference is None:
            from tokenizers import Tokenizer as RustTokenizer

            reference = RustTokenizer.from_str(tokenizer_json)
        self.reference = reference
        added = Needles([t["content"] for t in spec.get("added_tokens", [])])
        self._routed = added if routed_too is None else EitherFound(added, routed_too)
        self._whole: TextFinder | None = routed_too  # texts the file encodes whole
        self._segments: AddedSegments | None = None
        self.segments_refusal = AddedSegments.why_not(spec) or ""
        if not self.segments_refusal and spec.get("added_tokens"):
            self._segments = AddedSegments(spec["added_tokens"])

    def _route_whole(self, finder: TextFinder) -> None:
        """Texts ``finder`` finds go to the file whole, too."""
        self._routed = EitherFound(self._routed, finder)
        self._whole = finder if self._whole is None else EitherFound(self._whole, finder)

    def _check_segments(self, name: str) -> None:
        """Keep the cut at added tokens (``added_segments``) only where the engine gives the
        file's ids on the texts built from them; else texts holding one go to the file whole."""
        if self._segments is None:
            return
        differs = self._first_difference(self._segments.probe_texts(), special=False)
        if differs:
            self._segments = None
            self.segments_refusal = f"cut at its added tokens, {differs}"

    def _encode_routed(self, texts: Sequence[str]) -> list[np.ndarray]:
        """``texts`` (each holding an added token, or what ``_whole`` finds) encoded as the
        file encodes them: cut at their added tokens, the parts by the engine, where that is
        exact (``added_segments``); else by the file, in one call without offsets."""
        if not texts:
            return []
        segments, whole = self._segments, self._whole
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
        encoded = iter(self._encode_batch(between))
        token_ids = segments.ids
        for i, parts in cut.items():
            pieces = [
                next(encoded) if k % 2 == 0 else np.array([token_ids[part]], dtype=np.int32)
                for k, part in enumerate(parts)
                if part
            ]
            out[i] = np.concatenate(pieces) if pieces else EMPTY
        return out

    def _routed_apart(
        self, texts: Sequence[str], encode_rest: Callable[[list[str]], list[np.ndarray]]
    ) -> list[np.ndarray]:
        """Each text's ids: by the engine (``encode_rest``, given the texts in order), but for
        the texts ``_routed`` finds (an added token, or what the file must encode whole), which
        ``_encode_routed`` encodes together."""
        found = self._routed.found_in
        routed = [i for i, text in enumerate(texts) if found(text)]
        if not routed:
            return encode_rest(list(texts))
        apart = set(routed)
        rest = [i for i in range(len(texts)) if i not in apart]
        out: list[np.ndarray] = [EMPTY] * len(texts)
        for i, ids in zip(rest, encode_rest([texts[i] for i in rest])):
            out[i] = ids
        for i, ids in zip(routed, self._encode_routed([texts[i] for i in routed])):
            out[i] = ids
        return out

    def probe(self, name: str, texts: Sequence[str]) -> None:
        """Refuse unless ``texts`` encode exactly as ``self.reference`` (the file loaded by
        ``tokenizers``) encodes them, with the post-processor's tokens and without."""
        for special in (True, False):
            differs = self._first_difference(texts, special)
            if differs:
                raise ProbeMismatch(
                    f"tokenizer {name!r} cannot use the exact fast path ({self.engine_name}): {differs} (tokenizers, add_special_tokens={special})"
                )

    def _first_difference(self, texts: Sequence[str], special: bool) -> str:
        """The first of ``texts`` this encoder gives other ids than ``self.reference``, and
        both beginnings of its ids ("" where none differs)."""
        want = self.reference.encode_batch_fast(list(texts), add_special_tokens=special)
        for text, a, b in zip(texts, want, self.encode_batch(texts, add_special_tokens=special)):
            if a.ids != b.tolist():
                return f"{text[:40]!r} encodes as {b.tolist()[:8]}... instead of {a.ids[:8]}..."
        return ""


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

"""Which word cutter (``word_cutters``) reproduces a tokenizer.json's pre-tokenizer, read from
its spec: BERT's, Metaspace's (split or not, each prepend scheme), T5's WhitespaceSplit then
Metaspace, a split the normalizers make inert, or none; refused by name otherwise."""

from __future__ import annotations

from typing import Any

from beamtok._src.engines.quick_normalizers import StringSteps
from beamtok._src.engines.tokenizer_parts import steps_of
from beamtok._src.engines.word_cutters import (
    MARK,
    BertWords,
    MetaspaceWords,
    Refuse,
    SpaceMarkWords,
    WhitespaceMetaspaceWords,
    WordCutter,
)

__all__ = ["cutter_for", "inert_split"]


def inert_split(spec: dict[str, Any]) -> bool:
    """Whether the pre-tokenizer is a ``Split`` on one character the normalizers leave
    nowhere in the text, so that it never cuts (see the module docstring)."""
    pre = spec.get("pre_tokenizer") or {}
    literal = (pre.get("pattern") or {}).get("String")
    if pre.get("type") != "Split" or not isinstance(literal, str) or len(literal) != 1 or pre.get("invert"):
        return False
    gone = False
    for step in steps_of(spec, "normalizer"):
        kind = step.get("type")
        written = step.get("content") if kind == "Replace" else step.get("prepend") if kind == "Prepend" else None
        if not isinstance(written, str) or literal in written:
            gone = False  # this step may write the character (or is not one that cannot)
        elif kind == "Replace" and (step.get("pattern") or {}).get("String") == literal:
            gone = True
    return gone


def cutter_for(spec: dict[str, Any], reference: Any, refuse: Refuse) -> WordCutter:
    """The cutter for a tokenizer.json's pre-tokenizer, or ``refuse(why)`` raised."""
    cutter = _cutter_for(spec, reference, refuse)
    cutter.string_steps = StringSteps.of(spec)
    return cutter


def _cutter_for(spec: dict[str, Any], reference: Any, refuse: Refuse) -> WordCutter:
    pre = spec.get("pre_tokenizer") or {}
    model = spec.get("model") or {}
    kind = pre.get("type")
    if kind == "BertPreTokenizer":
        return BertWords(reference, spec.get("normalizer") or {})
    if model.get("type") == "WordPiece":
        raise refuse(f"its pre-tokenizer is {kind}, not BertPreTokenizer (the split this path reproduces on ASCII)")
    if kind == "Metaspace":
        split = bool(pre.get("split", True))
        replacement = str(pre.get("replacement", MARK))
        if not split:
            why = (
                SpaceMarkWords.why_not(model)
                if replacement == MARK
                else f"its Metaspace marks spaces with {replacement!r}"
            )
            if why is not None:
                raise refuse(f"its Metaspace pre-tokenizer does not split (the whole text is one word), and {why}")
        scheme = _prepend_scheme(pre)
        if scheme not in ("always", "first", "never"):
            raise refuse(f"its Metaspace prepend_scheme is {scheme!r}")
        return MetaspaceWords(reference, replacement, scheme != "never", split)
    if kind == "Sequence":
        return _sequence_cutter(pre, reference, refuse)
    if not pre or inert_split(spec):
        why = SpaceMarkWords.why_not(model)
        if why is not None:
            raise refuse(why)
        return SpaceMarkWords(reference)
    raise refuse(f"its pre-tokenizer is {kind}, which this path does not reproduce")


def _sequence_cutter(pre: dict[str, Any], reference: Any, refuse: Refuse) -> WordCutter:
    """T5's pre-tokenizer, ``WhitespaceSplit`` then ``Metaspace``, or ``refuse(why)`` raised."""
    steps = pre.get("pretokenizers") or []
    kinds = [step.get("type") for step in steps]
    if kinds != ["WhitespaceSplit", "Metaspace"]:
        raise refuse(
            f"its pre-tokenizer is a Sequence of {kinds}; of sequences this path reproduces WhitespaceSplit then Metaspace only"
        )
    metaspace = steps[1]
    if not metaspace.get("split", True):
        raise refuse("its Metaspace pre-tokenizer does not split")
    scheme = _prepend_scheme(metaspace)
    if scheme not in ("always", "never"):
        raise refuse(
            f"its Metaspace after WhitespaceSplit prepends {scheme!r}: which part is first depends on offsets this path does not keep"
        )
    return WhitespaceMetaspaceWords(reference, str(metaspace.get("replacement", MARK)), scheme == "always")


def _prepend_scheme(metaspace: dict[str, Any]) -> str:
    return str(metaspace.get("prepend_scheme", "always" if metaspace.get("add_prefix_space", True) else "never"))

"""Unicode normal forms exactly as ``tokenizers`` makes them, mostly at the speed of Python's.

``tokenizers`` normalizes with Unicode tables older than those of Python's ``unicodedata``
(3.11 has Unicode 14.0, 3.12 15.0), and about a hundred code points differ between them:
marks of Arabic Extended-B, Combining Diacritical Marks Extended and newer scripts carry a
combining class in one and none in the other, or a decomposition (``"\\u1dc4\\u0899"``:
Python puts the class-220 mark first, ``tokenizers`` keeps the order). Unicode's stability
policy makes such code points the only place the two can differ: an assigned character's
decomposition and combining class never change, and no new composite is made of characters
that already existed, so a difference needs a character one of them does not know, or a
new composite's parts.

:func:`differing_points` finds them by probing every code point in both: between U+0301
(class 230) and U+0334 (class 1), where any nonzero class reorders it, zero leaves it in
place and a decomposition shows; and, for the forms that compose (NFC, NFKC), alone under
NFD, where a canonical composite one side does not know shows: its parts join the set
(composition is canonical in both forms, so a compatibility decomposition's parts, such as
the digit of U+1FBF0, need not). That is done once a machine: the points
are kept for the two versions. :class:`ExactNormalForm` normalizes a text holding none of
them with ``unicodedata`` and one holding any with ``tokenizers`` itself.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from importlib import metadata
from typing import Any, Literal, cast, get_args

from beamtok._src.base.kept_json import keep_json, kept_json

__all__ = ["ExactNormalForm", "Form", "differing_points", "normal_form_of"]

Form = Literal["NFC", "NFKC", "NFD", "NFKD"]
COMPOSING = ("NFC", "NFKC")  # the forms that compose again (canonically) after decomposing
BLOCK = 8192  # code points probed in one call


@functools.cache
def differing_points(form: Form) -> frozenset[int]:
    """The code points near which ``unicodedata`` and ``tokenizers`` give other ``form``
    results: found once, then kept on this machine for this Unicode version of Python's
    and this version of ``tokenizers`` (``beamtok._src.base.kept_json``)."""
    name = f"normal-form-{form}-unicode-{unicodedata.unidata_version}-tokenizers-{metadata.version('tokenizers')}"
    kept = kept_json(name)
    if isinstance(kept, list) and all(isinstance(c, int) for c in kept):
        return frozenset(kept)
    found = _probed(form)
    keep_json(name, sorted(found))
    return found


def _probed(form: Form) -> frozenset[int]:
    from tokenizers import normalizers

    found = _differing(getattr(normalizers, form)(), form, lambda c: f"\u0301{chr(c)}\u0334")
    if form in COMPOSING:  # a canonical composite one of them does not know: its parts compose in the other only
        parts_of = normalizers.NFD()
        for c in _differing(parts_of, "NFD", chr):
            found.add(c)
            found.update(ord(p) for p in parts_of.normalize_str(chr(c)) + unicodedata.normalize("NFD", chr(c)))
    return frozenset(found)


def _differing(normalizer: Any, form: Form, probe: Callable[[int], str]) -> set[int]:
    """The code points whose ``probe`` text the two normalize otherwise, probed a block at a time."""
    found: set[int] = set()
    points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    for lo in range(0, len(points), BLOCK):
        block = points[lo : lo + BLOCK]
        probes = [probe(c) for c in block]
        joined = "\0".join(probes)  # NUL is a starter no normal form touches or composes with
        if normalizer.normalize_str(joined) != unicodedata.normalize(form, joined):
            found.update(
                c
                for c, text in zip(block, probes)
                if normalizer.normalize_str(text) != unicodedata.normalize(form, text)
            )
    return found


class ExactNormalForm:
    """``form`` (NFC, NFKC, NFD or NFKD) of a text as ``tokenizers``' normalizer of it makes it.

    Most text is in the form already, and Python's quick check says so far faster than
    looking for the points. Where Python's tables are the newer
    (every point they part ways at is one Python knows), a text Python finds in the form is
    in it for the older tables as well: a character the older tables know has the same class,
    decomposition and compositions in both, and one they do not know is to them a starter
    that composes with nothing, which only blocks more compositions and reorders less. So
    such a text is returned as it is; any other is searched for the points."""

    def __init__(self, form: Form) -> None:
        from tokenizers import normalizers

        self.form = form
        self._reference = getattr(normalizers, form)().normalize_str
        points = sorted(differing_points(form))
        self._differs = re.compile("[" + "".join(re.escape(chr(c)) for c in points) + "]") if points else None
        # every point they part ways at is one Python knows: its tables are the newer
        self._python_newer = all(unicodedata.category(chr(c)) != "Cn" for c in points)

    def __call__(self, text: str) -> str:
        if text.isascii():  # every normal form leaves ASCII as it is
            return text
        if self._python_newer and unicodedata.is_normalized(self.form, text):
            return text  # then the older tables leave it too (see the class docstring)
        if self._differs is not None and self._differs.search(text):
            return str(self._reference(text))
        return unicodedata.normalize(self.form, text)


def normal_form_of(normalizer: Any) -> ExactNormalForm | None:
    """The :class:`ExactNormalForm` of a ``tokenizers`` normalizer that is one normal form
    alone (``normalizers.NFKC()``, Unigram's as ``tokenizers`` trains it), else None."""
    form = type(normalizer).__name__
    return ExactNormalForm(cast(Form, form)) if form in get_args(Form) else None

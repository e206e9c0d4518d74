"""Texts holding added tokens, encoded as ``tokenizers`` encodes them: cut at the added
tokens, each part between encoded on its own by the fast path's engine, the tokens' own ids
in between.

Why the cut is exact. ``tokenizers`` finds the added tokens in the raw text first (those not
normalized: the fast path refuses the others, ``added_token_routing.refuse_unrouted_added_tokens``),
taking at each position the longest token that starts there, leftmost first; then it
normalizes, pre-tokenizes and encodes each part between them with nothing of its neighbours
(a ``Prepend`` normalizer prepends to every part, a ``Metaspace`` that always prepends marks
every part). A regular expression of the tokens as alternatives, longest first, makes the
same cuts: at a position it takes the first alternative that matches, which is the longest.
One setting makes a part depend on where it stands: a ``Metaspace`` that prepends its mark
to the first part only (``prepend_scheme`` ``first``); such files keep texts holding an added
token on ``tokenizers`` whole (``why_not``). Files whose added tokens include ``"\\n"`` (Gemma
2's and 3's) hold one in nearly every text: on ``tokenizers`` alone they ran no faster than
``tokenizers``.

At load the engine must give ``tokenizers``' ids on texts built from the added tokens
(``probe_texts``: each alone, inside a word, between spaces, twice in a row, and after each
other token, so that overlapping tokens such as ``"\\n"`` and ``"\\n\\n"`` meet), or the cut
is not used.
"""

from __future__ import annotations

import re
from typing import Any

from beamtok._src.engines.tokenizer_parts import steps_of

__all__ = ["AddedSegments"]

PROBED_TOKENS = 48  # added tokens the load probe builds texts from (the shortest, where a file has thousands)


class AddedSegments:
    """A file's added tokens (those not normalized), found in a text as ``tokenizers``
    finds them."""

    def __init__(self, added_tokens: list[dict[str, Any]]) -> None:
        self.ids = {t["content"]: int(t["id"]) for t in added_tokens if t.get("content")}
        ordered = sorted(self.ids, key=len, reverse=True)
        self.pattern = re.compile("(" + "|".join(map(re.escape, ordered)) + ")") if ordered else None

    @staticmethod
    def why_not(spec: dict[str, Any]) -> str | None:
        """Why a text of this file cannot be encoded part by part between its added tokens
        (None: it can)."""
        for step in steps_of(spec, "pre_tokenizer"):
            if step.get("type") == "Metaspace" and step.get("prepend_scheme") == "first":
                return "its Metaspace prepends its mark to the first part of a text only"
        return None

    def parts(self, text: str) -> list[str]:
        """The text cut at its added tokens: the parts between them at even places (empty
        ones included), the tokens at odd places."""
        assert self.pattern is not None
        return self.pattern.split(text)

    def probe_texts(self) -> list[str]:
        """Texts built from the added tokens, for the load probe (see the module docstring)."""
        tokens = sorted(self.ids, key=lambda t: (len(t), t))[:PROBED_TOKENS]
        texts = [
            form.format(t=t)
            for t in tokens
            for form in ("{t}", "a{t}b", "x {t} y", "{t}{t}", " {t}", "{t} ", "Ab\n{t}\ncD")
        ]
        texts += [f"x{t}{u}y" for t in tokens[:12] for u in tokens[:12]]
        return texts

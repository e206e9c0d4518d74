"""Normalizers run without calling the file's own through Python: a Unicode normal form or a
``Precompiled`` map on ASCII text by a table (``AsciiTable``), and a normalizer of literal
``Prepend`` and ``Replace`` steps by ``str`` operations (``StringSteps``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from beamtok._src.engines.tokenizer_parts import steps_of

__all__ = ["AsciiTable", "StringSteps"]

NON_ASCII = re.compile("[^\x00-\x7f]")


class AsciiTable:
    """What a normalizer that maps ASCII character by character (``word_cutters``' module docstring says which)
    makes of an ASCII text, without calling it. Where it changes nothing, the text itself;
    where each character becomes one ASCII character or none (NFKC, T5's map, BERT's), the
    text's bytes through ``bytes.translate``: ``str.translate`` with a dict looks each
    character up."""

    def __init__(self, normalizer: Any) -> None:
        changed = {c: normalizer.normalize_str(chr(c)) for c in range(128)}
        self.table = {c: to for c, to in changed.items() if to != chr(c)}
        self.crlf = normalizer.normalize_str("\r\n")
        self.unchanged = not self.table and self.crlf == "\r\n"
        self.byte_table: bytes | None = None
        if all(len(to) <= 1 and to.isascii() for to in self.table.values()) and self.crlf.isascii():
            table = bytearray(range(256))
            for c, to in self.table.items():
                if to:
                    table[c] = ord(to)
            self.byte_table = bytes(table)
            self.byte_deleted = bytes(c for c, to in self.table.items() if not to)
            self.byte_crlf = self.crlf.encode("ascii")

    def __call__(self, text: str) -> str:
        if self.unchanged:
            return text
        if self.byte_table is not None:
            data = text.encode("ascii")
            if b"\r\n" not in data:
                return data.translate(self.byte_table, self.byte_deleted).decode("ascii")
            parts = (part.translate(self.byte_table, self.byte_deleted) for part in data.split(b"\r\n"))
            return self.byte_crlf.join(parts).decode("ascii")
        if "\r\n" not in text:
            return text.translate(self.table)
        return self.crlf.join(part.translate(self.table) for part in text.split("\r\n"))

    def mixed(self, text: str, normalize: Callable[[str], str]) -> str:
        """A text that is not all ASCII, normalized: the lines holding a character past
        ASCII (runs of such lines at once) by ``normalize`` (the file's own, slow called
        from Python), the rest by the table. Exact for the normalizers
        ``takes``: a line starts after a newline, where ``Precompiled``'s graphemes always
        break (``\\r\\n`` stays whole inside a line's end) and where a normal form's
        composition and reordering cannot reach across (a newline is a starter that composes
        with nothing)."""
        parts: list[str] = []
        done = 0  # the text before this is normalized
        found = NON_ASCII.search(text)
        while found is not None:
            start = text.rfind("\n", done, found.start()) + 1 or done
            end = text.find("\n", found.end()) + 1 or len(text)
            found = NON_ASCII.search(text, end) if end < len(text) else None
            while found is not None and text.find("\n", end, found.start()) < 0:  # the next line holds one too
                end = text.find("\n", found.end()) + 1 or len(text)
                found = NON_ASCII.search(text, end) if end < len(text) else None
            if start > done:
                parts.append(self(text[done:start]))
            parts.append(normalize(text[start:end]))
            done = end
        if done < len(text):
            parts.append(self(text[done:]))
        return "".join(parts)

    @staticmethod
    def takes(normalizer: Any) -> bool:
        from tokenizers import normalizers

        return isinstance(
            normalizer,
            normalizers.Precompiled | normalizers.NFC | normalizers.NFD | normalizers.NFKC | normalizers.NFKD,
        )


class StringSteps:
    """A normalizer made only of ``Prepend`` and ``Replace`` of a literal string (Llama-2's,
    Mistral's and Gemma's spacing), done with ``str`` operations: ``tokenizers`` prepends to
    a text that is not empty and replaces every non-overlapping occurrence, left to right, as
    ``str.replace`` does, without calling it from Python."""

    def __init__(self, steps: list[tuple[str, str, str]]) -> None:
        self.steps = steps  # ("prepend", text, "") or ("replace", pattern, content)

    @staticmethod
    def of(spec: dict[str, Any]) -> StringSteps | None:
        """The steps of the tokenizer.json's normalizer, or None where it has another step."""
        if not spec.get("normalizer"):
            return None
        steps: list[tuple[str, str, str]] = []
        for step in steps_of(spec, "normalizer"):
            kind = step.get("type")
            if kind == "Prepend" and isinstance(step.get("prepend"), str):
                steps.append(("prepend", step["prepend"], ""))
            elif (
                kind == "Replace"
                and isinstance((step.get("pattern") or {}).get("String"), str)
                and step["pattern"]["String"]
                and isinstance(step.get("content"), str)
            ):
                steps.append(("replace", step["pattern"]["String"], step["content"]))
            else:
                return None
        return StringSteps(steps) if steps else None

    def __call__(self, text: str) -> str:
        for kind, a, b in self.steps:
            if kind == "prepend":
                text = a + text if text else text
            else:
                text = text.replace(a, b)
        return text

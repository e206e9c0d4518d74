"""Google docstring sections read from the source objects: which parameters a docstring's
``Args:`` section names (for the docstring checks of the public surface)."""

from __future__ import annotations

import inspect
import re
from typing import Any

SECTION = re.compile(
    r"^(\s*)(Args|Arguments|Parameters|Attributes|Returns|Yields|Raises|Example|Examples|Note|Notes):\s*$"
)
ENTRY = re.compile(r"^\s*(\*{0,2}[A-Za-z_]\w*)(\s*\([^)]*\))?\s*:")


def documented_args(doc: str | None) -> set[str]:
    """The names an ``Args:`` (or ``Attributes:``) section of ``doc`` lists."""
    names: set[str] = set()
    if not doc:
        return names
    lines = inspect.cleandoc(doc).splitlines()
    inside = False
    entry_indent: int | None = None
    for line in lines:
        header = SECTION.match(line)
        if header:
            inside = header.group(2) in ("Args", "Arguments", "Parameters", "Attributes")
            entry_indent = None
            continue
        if not inside or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            inside = False
            continue
        if entry_indent is None:
            entry_indent = indent
        if indent == entry_indent:
            match = ENTRY.match(line)
            if match:
                names.add(match.group(1).lstrip("*"))
    return names


def parameters(function: Any) -> list[str]:
    """A function's parameters a docstring must name (not ``self``/``cls``)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    return [name for name in signature.parameters if name not in ("self", "cls")]

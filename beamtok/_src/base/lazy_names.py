"""Names of a public namespace imported when first used (PEP 562), so that importing the
namespace imports no optional dependency: ``beamtok.training`` names PyTorch, JAX and grain
classes, and a user of one must not need the others.

A lazy namespace writes its imports once, in a block that never runs
(``if _NAMES_FOR_TOOLS:``): type checkers and the API reference read them there, and
:func:`lazy_names` reads the same lines to know which module defines each name.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["GUARD", "lazy_names", "names_in_guard"]

GUARD = "_NAMES_FOR_TOOLS"


def names_in_guard(source: str) -> dict[str, str]:
    """Each name the ``if _NAMES_FOR_TOOLS:`` block of a module's source imports, and its module.

    Args:
        source: The namespace module's source text.

    Returns:
        ``{name: module}`` in the order of the imports.
    """
    where: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == GUARD:
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        where[alias.asname or alias.name] = statement.module
    return where


def lazy_names(namespace: str, path: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a namespace whose names live in other modules.

    Args:
        namespace: The namespace's module name (``__name__``).
        path: Its source file (``__file__``), whose guarded imports say where each name lives.

    Returns:
        ``(__getattr__, __dir__)`` for the namespace module.
    """
    where = names_in_guard(Path(path).read_text(encoding="utf-8"))

    def get(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {namespace!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def names() -> list[str]:
        return sorted(where)

    return get, names

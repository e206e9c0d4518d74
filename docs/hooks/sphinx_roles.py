"""griffe extension for the API reference: Sphinx cross-reference roles in docstrings
(``:func:`load_tokenizer```, ``:meth:`~Dataset.iter```...) become links where the target is on
the site, and code where it is not, so no page shows a raw role.

A target is resolved in the scope of the object whose docstring names it (its module's imports,
its class's members), then linked by the path autorefs knows it by.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import griffe

DOCS = Path(__file__).resolve().parents[1]
DIRECTIVE = re.compile(r"^::: ([\w.]+)", re.M)
ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring of the package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        rendered = _rendered(pkg)
        for obj in _objects(pkg):
            if obj.docstring is not None and ":`" in obj.docstring.value:
                obj.docstring.value = ROLE.sub(
                    lambda m, o=obj: _link(pkg, o, m.group(1) == "~", m.group(2), rendered), obj.docstring.value
                )


def _rendered(pkg: griffe.Module) -> tuple[str, ...]:
    """The canonical paths the site's ``:::`` directives render (their members too)."""
    paths = []
    for page in DOCS.glob("*.md"):
        for name in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            if name != pkg.path and not name.startswith(pkg.path + "."):
                continue
            try:
                obj = pkg[name[len(pkg.path) + 1 :]] if name != pkg.path else pkg
            except KeyError:
                continue
            paths.append(obj.final_target.path if obj.is_alias else obj.path)
    return tuple(paths)


def _objects(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias and member.parent is obj:
            found += _objects(member)  # type: ignore[arg-type]
    return found


def _link(pkg: griffe.Module, obj: griffe.Object, short: bool, target: str, rendered: tuple[str, ...]) -> str:
    shown = target.rsplit(".", 1)[-1] if short else target
    path = _resolved(obj, target.lstrip("."))
    if path is None or not any(path == r or _rendered_under(pkg, path, r) for r in rendered):
        return f"`{shown}`"  # not on the site: code, not a dead link
    return f"[`{shown}`][{path}]"


def _rendered_under(pkg: griffe.Module, path: str, root: str) -> bool:
    """Whether ``path`` is rendered as a member of the object rendered at ``root``: a module
    shows what it exports (its ``__all__``), not its submodules."""
    if not path.startswith(root + ".") or not _documented(pkg, path):
        return False
    try:
        container = pkg[root[len(pkg.path) + 1 :]] if root != pkg.path else pkg
    except KeyError:
        return False
    if not container.is_module:
        return True
    head = path[len(root) + 1 :].split(".", 1)[0]
    exports = container.exports
    member = container.members.get(head)
    return (exports is None or head in exports) and member is not None and not member.is_module


def _documented(pkg: griffe.Module, path: str) -> bool:
    """Whether the member at ``path`` has a docstring (members without one are not rendered)."""
    try:
        member = pkg[path[len(pkg.path) + 1 :]]
    except KeyError:
        return False
    return bool(member.docstring and member.docstring.value.strip())


def _resolved(obj: griffe.Object, name: str) -> str | None:
    """The full path ``name`` means in ``obj``'s docstring, or None."""
    if name.startswith("beamtok."):
        return name
    scopes = [obj]
    while scopes[-1].parent is not None:
        scopes.append(scopes[-1].parent)
    head, _, rest = name.partition(".")
    for scope in scopes:
        if head in scope.members:
            return f"{scope.members[head].path}{'.' + rest if rest else ''}"
        try:
            found = scope.resolve(head)
        except (griffe.NameResolutionError, AttributeError):
            continue
        return f"{found}{'.' + rest if rest else ''}"
    return None

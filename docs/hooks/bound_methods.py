"""griffe extension for the API reference: a class attribute bound to a function written in
another module (``Dataset.tokenize = tokenizing.tokenize``, ``from_files =
constructor(file_sources.from_files)``, a classmethod typed by the class it is bound to) renders as the method it is at run time, with the
function's signature and docstring, instead of as an attribute.

griffe reads the source without running it, so it sees such a binding as an attribute whose
value is an expression; this resolves the expression in the class's module and puts a method
made from the function in its place.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import griffe


class BoundMethods(griffe.Extension):
    """Replace, once the package is loaded, every class attribute bound to a function."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for cls in _classes(pkg):
            for name, member in list(cls.members.items()):
                if member.is_alias or not member.is_attribute:
                    continue
                bound = _bound_function(pkg, cls, member)
                if bound is not None:
                    function, labels = bound
                    cls.set_member(name, _as_method(function, name, cls, labels))


def _classes(module: griffe.Module) -> list[griffe.Class]:
    """Every class defined in the package (not reached through imports)."""
    found: list[griffe.Class] = []
    for member in module.members.values():
        if member.is_alias:
            continue
        if member.is_module:
            found.extend(_classes(member))  # type: ignore[arg-type]
        elif member.is_class:
            found.append(member)  # type: ignore[arg-type]
    return found


def _bound_function(pkg: griffe.Module, cls: griffe.Class, member: Any) -> tuple[griffe.Function, set[str]] | None:
    """The function an attribute's value names (``module.func`` or ``classmethod(module.func)``)
    and the labels the method gets, or None for any other value."""
    value = member.value
    labels: set[str] = set()
    if isinstance(value, griffe.ExprCall) and str(value.function) in ("classmethod", "constructor", "staticmethod"):
        labels.add("staticmethod" if str(value.function) == "staticmethod" else "classmethod")
        value = value.arguments[0] if len(value.arguments) == 1 else None
    if not isinstance(value, griffe.ExprAttribute):
        return None
    try:
        target = cls.module.modules_collection.get_member(value.canonical_path)
    except (KeyError, ValueError, griffe.AliasResolutionError):
        return None
    if target.is_alias:
        target = target.final_target
    return (target, labels) if target.is_function else None


def _as_method(function: griffe.Function, name: str, cls: griffe.Class, labels: set[str]) -> griffe.Function:
    """A copy of ``function`` as method ``name`` of ``cls``, the type variable its dataset
    parameter is typed by (``D``) shown as the class itself, which it is at run time."""
    typevars = {n for n, m in function.module.members.items() if _is_typevar(m)}
    parameters = griffe.Parameters(
        *(
            griffe.Parameter(
                p.name,
                annotation=_spelled(p.annotation, typevars, cls),
                kind=p.kind,
                default=p.default,
                docstring=p.docstring,
            )
            for p in function.parameters
        )
    )
    method = griffe.Function(
        name,
        lineno=function.lineno,
        endlineno=function.endlineno,
        parameters=parameters,
        returns=_spelled(function.returns, typevars, cls),
        docstring=function.docstring,
        parent=cls,
    )
    method.labels |= labels
    return method


def _is_typevar(member: Any) -> bool:
    try:
        target = member.final_target if member.is_alias else member
    except griffe.AliasResolutionError:
        return False
    return bool(target.is_attribute and str(target.value).startswith("TypeVar("))


def _spelled(expr: Any, typevars: set[str], cls: griffe.Class) -> Any:
    """``expr`` with every name in ``typevars`` replaced by the name of ``cls``."""
    if isinstance(expr, griffe.ExprName):
        return griffe.ExprName(cls.name, parent=cls) if expr.name in typevars else expr
    if isinstance(expr, list):
        return [_spelled(e, typevars, cls) for e in expr]
    if isinstance(expr, griffe.Expr) and dataclasses.is_dataclass(expr):
        changes = {
            f.name: _spelled(getattr(expr, f.name), typevars, cls)
            for f in dataclasses.fields(expr)
            if f.init and f.name != "parent"
        }
        return dataclasses.replace(expr, **changes)
    return expr

"""The public surface, read from the package: every name the public modules export, with its
kind and signature (a class: its public methods and properties too).

``python tests/project/public_surface.py`` rewrites ``public_api.json`` after an intended
change; ``test_public_surface.py`` fails on any difference, so a change to the surface is a
visible diff in review.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PUBLIC_MODULES = ("beamtok", "beamtok.training", "beamtok.cache", "beamtok.beam", "beamtok.extend", "beamtok.testing")
SNAPSHOT = Path(__file__).with_name("public_api.json")


def signature_of(function: Any) -> str:
    try:
        return str(inspect.signature(function))
    except (TypeError, ValueError):
        return "(...)"


def own_members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties a class has from beamtok (not from torch, Beam...)."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("beamtok"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            yield name, value


def describe(obj: Any) -> dict[str, Any]:
    if inspect.isclass(obj):
        entry: dict[str, Any] = {"kind": "exception" if issubclass(obj, BaseException) else "class"}
        if dataclasses.is_dataclass(obj):
            entry["fields"] = [f.name for f in dataclasses.fields(obj)]
        elif not issubclass(obj, BaseException) and not getattr(obj, "_is_protocol", False):
            entry["init"] = signature_of(obj.__init__) if "__init__" in vars(obj) else "(inherited)"
        members = {}
        for name, value in own_members(obj):
            # classmethod, staticmethod and beamtok's typed classmethod (``constructor``) wrap __func__
            raw = getattr(value, "__func__", value)
            if isinstance(value, property):
                members[name] = "property"
            elif inspect.isfunction(raw):
                bound = raw is not value and not isinstance(value, staticmethod)
                members[name] = ("classmethod " if bound else "") + signature_of(raw)
        entry["members"] = members
        return entry
    if inspect.isfunction(obj):
        return {"kind": "function", "signature": signature_of(obj)}
    return {"kind": "value", "type": type(obj).__name__}


def public_objects() -> Iterator[tuple[str, str, Any]]:
    """``(module, name, object)`` of every public name."""
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name != "__version__":
                yield module_name, name, getattr(module, name)


def surface() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for module_name, name, obj in public_objects():
        out.setdefault(module_name, {})[name] = describe(obj)
    return out


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(surface(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)

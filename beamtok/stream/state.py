"""Helpers that keep stage states strict: exact keys, JSON types, copies not references."""

from __future__ import annotations

import json
from typing import Any

from beamtok.base.errors import StateError

__all__ = ["check_keys", "copy_state"]


def copy_state(state: Any) -> Any:
    """A copy made through JSON, so restoring never mutates (or keeps a reference to) the
    caller's dict, and a state holding anything but JSON values (whose copying could run
    code) is refused."""
    try:
        return json.loads(json.dumps(state, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise StateError(f"a state must hold only JSON values: {e}") from None


def check_keys(state: Any, keys: tuple[str, ...], stage: str) -> dict[str, Any]:
    """Return ``state`` if it is a dict with exactly ``keys``; raise a StateError naming the stage."""
    if not isinstance(state, dict):
        raise StateError(f"{stage}: state must be a JSON object, got {type(state).__name__}")
    unknown = sorted(set(state) - set(keys))
    missing = sorted(set(keys) - set(state))
    if unknown or missing:
        problems = ([f"lacks keys {missing}"] if missing else []) + (
            [f"has keys it does not know {unknown}"] if unknown else []
        )
        raise StateError(
            f"{stage}: the state {' and '.join(problems)} (a state of another beamtok version, or edited by hand?)"
        )
    return state

"""Every per-document step by its JSON name (``op``): the one table a spec's steps are read
back through."""

from __future__ import annotations

from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.core.steps import BosEosStep, FilterStep, LengthFilterStep, MapStep, Step, TokenizeStep
from beamtok._src.core.supervised_steps import ChatStep, SftStep

__all__ = ["STEP_TYPES", "step_from_json"]

STEP_TYPES: dict[str, type[Step]] = {
    cls.OP: cls for cls in (MapStep, FilterStep, TokenizeStep, SftStep, ChatStep, BosEosStep, LengthFilterStep)
}


def step_from_json(data: Any) -> Step:
    """Rebuild a step from its JSON form (user functions come back as names only)."""
    if not isinstance(data, dict) or data.get("op") not in STEP_TYPES:
        raise ConfigError(f"unknown per-document step {data!r}")
    try:
        return STEP_TYPES[data["op"]].from_json(data)
    except TypeError as e:
        raise ConfigError(f"malformed {data['op']} step: {e}") from e

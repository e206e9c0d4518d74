"""The ``iter()`` calls of the last release (``iter(state_dict=)``, ``iter(list)``,
``iter(start_example=)``, ``iter(step=)``), read for one more release with a DeprecationWarning:
each says which of today's calls it is (``iterating.iter`` makes it)."""

from __future__ import annotations

import warnings
from typing import Any

from beamtok._src.base.errors import ConfigError

__all__ = ["todays_call"]


def todays_call(state: Any, state_dict: Any, start_example: int | None, step: int | None) -> tuple[str, Any]:
    """Today's call for an old-style ``iter()`` call, warned about: ``("iter", state)``,
    ``("iter_at_example", n)`` or ``("iter_at_step", n)``.

    Args:
        state: What was passed first (a state, a list of states, or None).
        state_dict: The old keyword's value.
        start_example: The old keyword's value.
        step: The old keyword's value.
    """
    if state_dict is not None:
        if state is not None:
            raise ConfigError("pass the state once: iter(state)")
        _deprecated("iter(state_dict=...) is now iter(state)")
        state = state_dict
    given = [
        name
        for name, value in (("a state", state), ("start_example", start_example), ("step", step))
        if value is not None
    ]
    if len(given) > 1:
        raise ConfigError(f"pass one of a state, start_example and step, not {' and '.join(given)}")
    if isinstance(state, list):
        _deprecated("iter(states) with every reader's states is now iter_merged(states)")
    if start_example is not None:
        _deprecated("iter(start_example=N) is now iter_at(example=N)")
        return "iter_at_example", start_example
    if step is not None:
        _deprecated("iter(step=N) is now iter_at(N)")
        return "iter_at_step", step
    return "iter", state


def _deprecated(what: str) -> None:
    warnings.warn(f"{what}; the old call goes in the next release", DeprecationWarning, stacklevel=4)

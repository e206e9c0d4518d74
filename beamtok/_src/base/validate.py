"""Checks of user options, each written once: a bad value is a ConfigError naming the option."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beamtok._src.base.errors import ConfigError, StateError

__all__ = ["check_bool", "check_choice", "check_int", "check_optional_int", "unencodable"]


def check_int(value: Any, name: str, stage: str | None = None, *, minimum: int = 0) -> int:
    """``value`` if it is an integer (not a bool) of at least ``minimum``. A user's option
    (no ``stage``) that is not one is a ConfigError; a value read from a state, a StateError
    naming the ``stage`` whose state holds it."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        if stage is not None:
            raise StateError(f"{stage}: {name} must be an integer >= {minimum}, got {value!r}")
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_bool(value: Any, name: str, stage: str) -> bool:
    """``value`` read from a state if it is a boolean, else a StateError naming the ``stage``."""
    if not isinstance(value, bool):
        raise StateError(f"{stage}: {name} must be a boolean, got {value!r}")
    return value


def check_optional_int(value: Any, name: str, *, minimum: int = 0) -> int | None:
    """Like :func:`check_int`, but None is accepted too."""
    return None if value is None else check_int(value, name, minimum=minimum)


def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return str(value)


def unencodable(text: str) -> str | None:
    """Why ``text`` cannot go to a tokenizer (a lone surrogate, e.g. from a JSON ``\\ud800``
    escape, has no UTF-8 form), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"text holds a lone surrogate {text[e.start]!r} at character {e.start}, which has no UTF-8 form"
    return None

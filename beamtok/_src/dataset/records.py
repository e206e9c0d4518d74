"""Per-shard stages on document records: ``map``, ``filter`` and the token-length filter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from beamtok._src.core.spec import callable_name
from beamtok._src.core.steps import FilterStep, LengthFilterStep, MapStep
from beamtok._src.dataset.stage_adding import D, with_step

__all__ = ["filter", "filter_length", "map"]


def map(self: D, fn: Callable[[dict[str, Any]], dict[str, Any]], *, name: str | None = None) -> D:
    """Transform each document record (before or after tokenize).

    Args:
        fn: Called with each document record (a dict); returns the record to keep in its place.
        name: The step's name in fingerprints and states (default: the function's qualified name); give
            one for a lambda.
    Returns:
        A new Dataset with this step added (datasets are immutable).
    """
    return with_step(self, MapStep(name or callable_name(fn), fn))


def filter(self: D, fn: Callable[[dict[str, Any]], bool], *, name: str | None = None) -> D:
    """Keep documents for which ``fn(record)`` is true; others count as ``filtered``.

    Args:
        fn: Called with each document record; a false result skips it (counted as ``filtered``).
        name: The step's name in fingerprints and states (default: the function's qualified name).
    Returns:
        A new Dataset with this step added (datasets are immutable).
    """
    return with_step(self, FilterStep(name or callable_name(fn), fn))


def filter_length(self: D, *, min_tokens: int | None = None, max_tokens: int | None = None) -> D:
    """Skip documents shorter or longer than these token counts (counted as too_short/too_long).

    Args:
        min_tokens: Skip documents with fewer tokens (counted as ``too_short``); None: no floor.
        max_tokens: Skip documents with more tokens (counted as ``too_long``); None: no ceiling.
    Returns:
        A new Dataset with this step added (datasets are immutable).
    """
    return with_step(self, LengthFilterStep(min_tokens, max_tokens))

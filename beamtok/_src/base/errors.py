"""Exceptions beamtok raises for user errors.

Every user-facing failure is a :class:`BeamtokError`; the CLI prints its message on one line
and exits non-zero without a traceback. Anything else is a bug in beamtok.
"""

from __future__ import annotations

__all__ = ["BeamtokError", "CacheError", "ConfigError", "InputError", "StateError"]


class BeamtokError(Exception):
    """Base class of every error caused by input, configuration or state."""


class ConfigError(BeamtokError, ValueError):
    """An option or a pipeline is invalid; raised before any work starts."""


class InputError(BeamtokError):
    """A shard or a document cannot be read; the message names the URL and line/row."""


class StateError(BeamtokError, ValueError):
    """A checkpoint state does not fit the pipeline it is restored into."""


class CacheError(BeamtokError):
    """A cache is unfinished, corrupt, or was built with another spec."""

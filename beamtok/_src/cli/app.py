"""The ``beamtok`` command group and what every command shares: logging options, and user
errors as one line.

User errors (bad options, unreadable input, mismatched states) print one line, prefixed
``beamtok: error:``, and exit with status 2; they never show a traceback.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from beamtok._src.base.errors import BeamtokError

__all__ = ["is_cache", "log_options", "main", "user_errors"]

F = TypeVar("F", bound=Callable[..., Any])

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def configure_logging(verbose: int, quiet: bool, log_level: str | None) -> None:
    """beamtok's messages at INFO (WARNING with -q, DEBUG with -v); Beam's at ERROR (WARNING
    with -v, INFO with -vv); ``--log-level`` sets both."""
    from beamtok._src.base.errors import ConfigError

    if quiet and (verbose or log_level):
        raise ConfigError("-q cannot be combined with -v or --log-level")
    ours = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    beams = (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 3)]
    if log_level is not None:
        ours = beams = getattr(logging, log_level.upper())
    if beams > logging.DEBUG:
        # gRPC's C core (Beam's runner channels) writes its own lines to stderr, such as an
        # epoll error while a build that hit a write limit shuts down: the command says what
        # went wrong in one line; -vvv or --log-level debug shows them again
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    _to_stderr("beamtok", "beamtok: %(message)s", ours)
    _to_stderr("apache_beam", "%(levelname)s:%(name)s:%(message)s", beams)


def _to_stderr(name: str, form: str, level: int) -> None:
    """Logger ``name``'s records at ``level`` and above on stderr, in ``form``, and nowhere else."""
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(form))
    logger = logging.getLogger(name)
    logger.handlers = [handler]
    logger.setLevel(level)
    logger.propagate = False


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (tests swap it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def log_options(fn: F) -> F:
    """``--log-level``, ``-v`` and ``-q`` on a command; logging is set up before it runs."""

    @click.option(
        "--log-level",
        type=click.Choice(LEVELS, case_sensitive=False),
        help="Level of beamtok's and Beam's log messages.",
    )
    @click.option(
        "--verbose", "-v", count=True, help="More messages: -v beamtok's debug and Beam's warnings, -vv Beam's info."
    )
    @click.option("--quiet", "-q", is_flag=True, help="Warnings and errors only; no progress display.")
    @functools.wraps(fn)
    def wrapper(*args: Any, log_level: str | None, verbose: int, quiet: bool, **kwargs: Any) -> Any:
        try:
            configure_logging(verbose, quiet, log_level)
        except BeamtokError as e:
            click.echo(f"beamtok: error: {e}", err=True)
            sys.exit(2)
        return fn(*args, quiet=quiet, **kwargs)

    return wrapper  # type: ignore[return-value]


def user_errors(fn: F) -> F:
    """Turn BeamtokError into a one-line message and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BeamtokError as e:
            click.echo(f"beamtok: error: {e}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="beamtok")
def main() -> None:
    """Tokenize and pack LLM training data, on the fly or through a Beam-built cache."""


def is_cache(path: str) -> bool:
    """Whether ``path`` holds a finished cache (its manifest)."""
    from beamtok._src.cache.format.manifest import MANIFEST
    from beamtok._src.cache.format.storage import Storage

    try:
        return Storage(path).exists(MANIFEST)
    except Exception:  # not a directory pyarrow can open: input files
        return False

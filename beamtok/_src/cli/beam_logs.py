"""Beam's log records of a user error: dropped, since the command reports it in one line."""

from __future__ import annotations

import logging

from beamtok._src.base.errors import BeamtokError

__all__ = ["quiet_beam_logs"]

BEAM_LOGGERS = (
    "",
    "apache_beam.runners.common",
    "apache_beam.runners.worker.sdk_worker",
    "apache_beam.runners.worker.bundle_processor",
    "apache_beam.runners.portability.fn_api_runner.fn_runner",
    "apache_beam.runners.portability.fn_api_runner.worker_handlers",
    "apache_beam.runners.portability.local_job_service",  # relays a local worker's own log records
)


def _quiet_beam_logs(record: logging.LogRecord) -> bool:
    """Drop Beam's logged traceback of a user error, which the CLI reports in one line itself."""
    from beamtok._src.cache.build.output import out_of_room

    if record.name.startswith("apache_beam") and "KeyboardInterrupt" in record.getMessage():
        return False  # a local worker's own report of Ctrl-C: the interrupt is reported in one line
    error = record.exc_info[1] if record.exc_info else None
    if error is not None and out_of_room(error) is not None:
        return False  # reported in one line as a CacheError
    return not (
        isinstance(error, BeamtokError)
        or "beamtok._src.base.errors." in (record.exc_text or "")
        or _names_user_error(record)
    )


def _names_user_error(record: logging.LogRecord) -> bool:
    # Beam logs a DoFn's failure with the traceback as text; a user error's class is in it.
    return record.name.startswith("apache_beam") and any(
        f"beamtok._src.base.errors.{name}" in record.getMessage()
        for name in ("InputError", "ConfigError", "CacheError", "StateError")
    )


def quiet_beam_logs() -> None:
    """Filter Beam's loggers so a user error's traceback is not logged (a logger's filters see
    only records logged on it, not its children's, so each is filtered)."""
    for name in BEAM_LOGGERS:
        logging.getLogger(name).addFilter(_quiet_beam_logs)

"""Beam's FnApiRunner for local builds, its worker processes started by ``local_worker``.

With ``--direct_running_mode=multi_processing`` the FnApiRunner starts each worker as
``python -m apache_beam.runners.worker.sdk_worker_main``; this runner starts the same worker
through :mod:`beamtok._src.beam.local_worker`, which ignores the terminal's Ctrl-C, so an
interrupted build prints one line, not the workers' tracebacks; on Linux, forked warm by this
process's worker server (``beamtok._src.beam.worker_server``: started before Beam's import by
``start_early`` where the caller could, else here, and kept for the next builds). Everything
else is Beam's.
"""

from __future__ import annotations

from beamtok._src.beam import beam_import  # noqa: F401  (first: Beam's import with its GCP warning dropped)

# isort: split

import contextlib
import logging
import shlex
import sys
from collections.abc import Iterator
from typing import Any

from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms.environments import SubprocessSDKEnvironment

from beamtok._src.beam.worker_server import process_server

__all__ = ["LocalRunner", "worker_command"]

_FN_RUNNER_LOGGER = "apache_beam.runners.portability.fn_api_runner.fn_runner"


def worker_command() -> str:
    """The shell command a local worker process is started with."""
    return f"{shlex.quote(sys.executable)} -m beamtok._src.beam.local_worker"


class LocalRunner(FnApiRunner):
    """The FnApiRunner, its ``multi_processing`` workers started by ``beamtok._src.beam.local_worker``."""

    def run_pipeline(self, pipeline: Any, options: Any) -> Any:
        direct = options.view_as(DirectOptions)
        if direct.direct_running_mode != "multi_processing":
            return super().run_pipeline(pipeline, options)
        # Beam picks its own worker command for this mode; the same subprocess environment
        # with our command is what "in_memory" keeps when it is set before the run.
        server = process_server()
        command = server.worker_command() if server is not None else worker_command()
        self._default_environment = SubprocessSDKEnvironment.from_command_string(command)
        direct.direct_running_mode = "in_memory"
        try:
            with _without_mode_warning():
                return super().run_pipeline(pipeline, options)
        finally:
            direct.direct_running_mode = "multi_processing"


class _ModeWarning(logging.Filter):
    """Beam's advice to use multi_processing with several workers: it is in use."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("If direct_num_workers is not equal to 1")


@contextlib.contextmanager
def _without_mode_warning() -> Iterator[None]:
    logger = logging.getLogger(_FN_RUNNER_LOGGER)
    warning = _ModeWarning()
    logger.addFilter(warning)
    try:
        yield
    finally:
        logger.removeFilter(warning)

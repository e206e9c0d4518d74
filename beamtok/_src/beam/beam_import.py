"""Apache Beam, imported once with its optional-GCP-clients warning dropped.

Beam's import logs "apitools not found ..." through ``logging.warning`` when the GCP extras
are missing, which a local build never uses; that call also installs a root handler on an
unconfigured root logger. Both are undone here; every other Beam warning is left alone.
Modules that import Beam import this module first.
"""

from __future__ import annotations

import logging

from beamtok._src.base.gc_pause import gc_paused

__all__: list[str] = []


class _DropApitoolsWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("apitools not found")


def _import_beam_quietly() -> None:
    root = logging.getLogger()
    handlers = list(root.handlers)
    quiet = _DropApitoolsWarning()
    root.addFilter(quiet)
    try:
        import apache_beam
        import apache_beam.io.gcp.internal.clients.bigquery  # noqa: F401  (the module that warns)
    except ImportError:
        pass  # the GCP extras are optional; plain Beam is imported again by the caller and fails loudly if missing
    finally:
        root.removeFilter(quiet)
        if not handlers:  # logging.warning() configured the unconfigured root: undo that
            for handler in list(root.handlers):
                root.removeHandler(handler)


with gc_paused():  # Beam's import leaves ~190,000 objects for the collector to track and frees few
    _import_beam_quietly()

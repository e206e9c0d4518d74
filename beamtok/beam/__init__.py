"""Apache Beam transforms that build a beamtok cache (``pip install 'beamtok[beam]'``).

Importing this package imports Beam; nothing else in beamtok does, so the online iterator
never needs it. Beam's own import logs a warning about its optional GCP clients
("apitools not found ...") on the root logger, which a local build never uses: it is dropped
here, and the root handler that warning would install is taken away again. Every other
Beam warning is left alone.
"""

from __future__ import annotations

import logging

from beamtok.base.gc_pause import gc_paused


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
        pass  # the GCP extras are optional; plain Beam is imported again below and fails loudly if missing
    finally:
        root.removeFilter(quiet)
        if not handlers:  # logging.warning() configured the unconfigured root: undo that
            for handler in list(root.handlers):
                root.removeHandler(handler)


with gc_paused():  # Beam's import leaves ~190,000 more objects for the collector to track and frees few: collections during it only cost time
    _import_beam_quietly()
    from beamtok.beam.build import BuildCache
    from beamtok.beam.pipelines import LOCAL_RUNNERS, beam_counters, is_local, make_pipeline
    from beamtok.cache.format.manifest import versions

__all__ = ["LOCAL_RUNNERS", "BuildCache", "beam_counters", "is_local", "make_pipeline", "versions"]

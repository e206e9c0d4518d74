"""Beam pipelines for a build: made for the options given (local runs pinned to the
FnApiRunner, so the DirectRunner's Prism download is never tried), their temporary directory
held, and the beamtok counters read back from a result."""

from __future__ import annotations

from beamtok._src.beam import beam_import  # noqa: F401  (first: Beam's import with its GCP warning dropped)

# isort: split

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.scratch import held_directory
from beamtok._src.core.cache_options import LOCAL_RUNNERS

__all__ = ["LOCAL_RUNNERS", "METRICS_NAMESPACE", "beam_counters", "is_local", "make_pipeline", "pipeline_for"]

METRICS_NAMESPACE = "beamtok"


@contextlib.contextmanager
def pipeline_for(beam_args: Sequence[str]) -> Iterator[beam.Pipeline]:
    """:func:`make_pipeline`'s pipeline, whose local temporary directory goes with it: Beam
    makes one for every pipeline it builds and removes it only when the pipeline runs, so each
    build refused before its run (an output to overwrite, a held lock, a local runner given to
    a dry run) would leave one in the temporary directory."""
    pipeline = make_pipeline(beam_args)
    with held_directory(pipeline.local_tempdir):
        yield pipeline


def make_pipeline(beam_args: Sequence[str]) -> beam.Pipeline:
    """A Beam pipeline for these options; local runs are pinned to the FnApiRunner.

    Args:
        beam_args: Beam's command-line options (``--runner=DataflowRunner``, ``--project=...``).

    Raises:
        ConfigError: The runner refused its options (a missing project or region...), or a Dask
            build has no scheduler that answers (``beamtok._src.beam.dask_options``).
    """
    from beamtok._src.beam.dask_options import check_dask_args
    from beamtok._src.beam.options import DASK_RUNNER, runner_name

    args = runner_name(list(beam_args))
    options = PipelineOptions(args)
    if options.view_as(StandardOptions).runner == DASK_RUNNER:
        check_dask_args(args)
    if options.view_as(StandardOptions).runner in LOCAL_RUNNERS:
        from beamtok._src.beam.local_runner import LocalRunner

        return beam.Pipeline(runner=LocalRunner(), options=options)
    try:
        return beam.Pipeline(options=options)
    except ValueError as e:  # the runner's checks of its options (a project id, a region...)
        raise ConfigError(" ".join(str(e).split())) from e


def is_local(pipeline: beam.Pipeline) -> bool:
    """Whether the pipeline runs on this machine.

    Args:
        pipeline: A pipeline ``make_pipeline`` made.
    """
    return pipeline.options.view_as(StandardOptions).runner in LOCAL_RUNNERS


def beam_counters(result: Any) -> dict[str, int]:
    """The pipeline's beamtok counters (committed values where the runner has them).

    Args:
        result: What ``pipeline.run()`` returned.

    Returns:
        Each counter's total by name; empty where the runner reports no metrics.
    """
    try:
        found = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))["counters"]
    except Exception:  # some runners report no metrics
        return {}
    out: dict[str, int] = {}
    for counter in found:
        value = counter.committed if counter.committed is not None else counter.attempted
        out[counter.key.metric.name] = out.get(counter.key.metric.name, 0) + int(value or 0)
    return out

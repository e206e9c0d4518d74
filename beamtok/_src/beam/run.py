"""Build (or complete) a cache: check the output directory, run the Beam pipeline under the
directory's build lock, check what it wrote.

A cache directory holds one cache: one spec, one list of input files. A re-run with the same
spec and inputs completes it (finished shards are kept); another spec or another input list
is refused unless ``overwrite``, which first removes every file of the old cache. A build
holds the directory's build lock (``build.lock``) from the check to the manifest; a write that
finds no room (disk, quota, file size limit) ends it with one CacheError.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence

from beamtok._src.base.errors import CacheError, ConfigError
from beamtok._src.base.gc_pause import gc_paused
from beamtok._src.base.scratch import scratch_directory
from beamtok._src.beam.build import BuildCache
from beamtok._src.beam.dask_options import lost_scheduler
from beamtok._src.beam.options import check_beam_args
from beamtok._src.beam.pipelines import beam_counters, is_local, pipeline_for
from beamtok._src.beam.worker_count import fitted_worker_args
from beamtok._src.beam.worker_logs import quiet_worker_stderr
from beamtok._src.cache.build.lock import BuildLock
from beamtok._src.cache.build.output import check_counters, check_output, prepare_output, write_failures
from beamtok._src.cache.build.progress import PROGRESS_DIR_ENV, BuildProgress
from beamtok._src.cache.build.ranges import DEFAULT_SPLIT_BYTES, split_bytes_option
from beamtok._src.cache.format.manifest import MANIFEST, TOKENIZER_FILE, Manifest, read_manifest
from beamtok._src.cache.format.storage import Storage
from beamtok._src.core.spec import Spec
from beamtok._src.sources.urls import Shard, check_bucket_names

__all__ = ["cache_transform", "run_cache"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """``name=value`` in the environment while the block runs (worker processes inherit it)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def cache_transform(
    spec: Spec,
    shards: Sequence[Shard],
    output: str,
    *,
    row_group_rows: int | None = None,
    row_group_bytes: int | None = None,
    parquet_compat: bool = False,
    split_bytes: int | str | None = DEFAULT_SPLIT_BYTES,
) -> BuildCache:
    """The Beam transform of a cache build, whose caller writes ``tokenizer.json`` (once the
    directory is this build's; never, for a dry run)."""
    return BuildCache(
        spec,
        shards,
        output,
        tokenizer_file=TOKENIZER_FILE,
        row_group_rows=row_group_rows,
        row_group_bytes=row_group_bytes,
        parquet_compat=parquet_compat,
        split_bytes=split_bytes_option(split_bytes, "split_bytes"),
        write_tokenizer=False,
    )


def run_cache(
    spec: Spec,
    shards: Sequence[Shard],
    output: str,
    beam_args: Sequence[str] = (),
    *,
    overwrite: bool = False,
    progress: bool = True,
    row_group_rows: int | None = None,
    row_group_bytes: int | None = None,
    parquet_compat: bool = False,
    split_bytes: int | str | None = DEFAULT_SPLIT_BYTES,
    on_counters: Callable[[dict[str, int]], None] | None = None,
) -> Manifest:
    """Build (or complete) the cache of ``shards`` under ``output``; return its manifest.

    Files larger than ``split_bytes`` (a number of bytes or a size such as ``"256MB"``; None
    or ``"none"``: never) are tokenized in ranges by several workers; the cache is the same either way.
    ``parquet_compat`` writes files every Parquet reader opens (snappy rather than zstd).
    ``on_counters`` receives the pipeline's Beam counters (documents, ranges, shards written
    and reused...) when the runner reports them."""
    if spec.tokenizer is None:
        raise ConfigError("a cache holds tokens: call tokenize() before cache()")
    beam_args = fitted_worker_args(check_beam_args(beam_args), shards, split_bytes_option(split_bytes, "split_bytes"))
    check_bucket_names([output, *beam_args, *(s.url for s in shards)])
    storage = Storage(output)
    check_output(storage)
    with contextlib.ExitStack() as cleanup:
        with gc_paused():  # building the graph makes many lasting objects; collections then walk all of Beam
            transform = cache_transform(
                spec,
                shards,
                output,
                row_group_rows=row_group_rows,
                row_group_bytes=row_group_bytes,
                parquet_compat=parquet_compat,
                split_bytes=split_bytes,
            )
            pipeline = cleanup.enter_context(pipeline_for(beam_args))
            _ = pipeline | BuildCache.__name__ >> transform
        local = is_local(pipeline)
        with BuildLock(storage), write_failures(output):
            prepare_output(storage, spec, shards, overwrite=overwrite, parquet_compat=parquet_compat)
            transform.write_tokenizer_file()  # where the workers read it
            log.debug(
                "running the build of %d shards into %s with Beam options %s (%s)",
                len(shards),
                output,
                list(beam_args),
                "local" if local else "remote",
            )
            with contextlib.ExitStack() as stack:
                monitor = None
                if local:
                    stream = stack.enter_context(quiet_worker_stderr())
                    directory = stack.enter_context(scratch_directory("beamtok-progress-"))
                    stack.enter_context(_environment(PROGRESS_DIR_ENV, directory))
                    monitor = BuildProgress(storage, len(shards), directory, enabled=progress, stream=stream)
                    monitor.start()
                # a lost Dask scheduler is said in one line below, not in the client's tracebacks
                stack.enter_context(_quiet_logger("distributed.client"))
                try:
                    result = pipeline.run()
                    result.wait_until_finish()
                finally:
                    if monitor is not None:
                        monitor.stop()
            if not storage.exists(MANIFEST):
                lost = lost_scheduler(beam_args)
                raise CacheError(f"{output}: {lost or f'the pipeline finished but wrote no {MANIFEST}'}")
            manifest = read_manifest(storage)
    counters = beam_counters(result)
    log.debug("Beam counters %s", json.dumps(counters, sort_keys=True))
    check_counters(counters, manifest)
    if on_counters is not None and counters:
        on_counters(counters)
    return manifest


@contextlib.contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    """``name``'s log records below CRITICAL dropped while the block runs."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)

"""Build (or complete) a cache: check the output directory, run the Beam pipeline, check
what it wrote. Beam is imported only inside :func:`run_cache` and :func:`cache_transform`.

A cache directory holds one cache: one spec, one list of input files. A re-run with the same
spec and inputs completes it (finished shards are kept); another spec or another input list
is refused unless ``overwrite``, which first removes every file of the old cache. A build
holds the directory's build lock (``build.lock``) from the check to the manifest; a write that
finds no room (disk, quota, file size limit) ends it with one CacheError.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from beamtok.cache.lock import BuildLock
from beamtok.cache.manifest import MANIFEST, SHARDS_DIR, TOKENIZER_FILE, Manifest, read_manifest
from beamtok.cache.progress import PROGRESS_DIR_ENV, BuildProgress
from beamtok.cache.ranges import DEFAULT_SPLIT_BYTES, RANGES_DIR, split_bytes_option
from beamtok.cache.storage import Storage
from beamtok.errors import CacheError, ConfigError
from beamtok.sources.urls import Shard
from beamtok.spec import Spec

__all__ = ["cache_transform", "check_counters", "other_cache", "out_of_room", "prepare_output", "run_cache"]

if TYPE_CHECKING:
    from beamtok.beam import BuildCache

log = logging.getLogger(__name__)


def prepare_output(storage: Storage, spec: Spec, shards: Sequence[Shard], *, overwrite: bool) -> None:
    """Refuse a directory holding another cache (unless ``overwrite``, which empties it);
    mark it unfinished until the new manifest is written."""
    problem = other_cache(storage, spec, shards)
    if problem is not None and not overwrite:
        raise CacheError(f"{storage.url} {problem}; pass --overwrite to replace it, or choose another --output")
    if problem is not None:
        for name in storage.list(SHARDS_DIR):
            storage.delete(f"{SHARDS_DIR}/{name}")
        storage.delete(TOKENIZER_FILE)
    storage.delete(MANIFEST)
    storage.delete_stale_temporaries(SHARDS_DIR)
    for name in storage.list(RANGES_DIR):  # tokenized ranges of a killed run: redone
        storage.delete(f"{RANGES_DIR}/{name}")


def other_cache(storage: Storage, spec: Spec, shards: Sequence[Shard]) -> str | None:
    """What makes the directory's cache another one than (spec, shards), or None."""
    urls = [s.url for s in shards]
    if storage.exists(MANIFEST):
        try:
            manifest = read_manifest(storage)
        except CacheError:
            return "holds an unreadable manifest"
        if manifest.fingerprint != spec.fingerprint:
            return f"holds a cache built with spec {manifest.fingerprint}, not {spec.fingerprint}"
        old = [e.url for e in manifest.shards]
        if old != urls:
            return f"holds a cache of other input files ({_first_difference(old, urls)})"
    names = storage.list(SHARDS_DIR)
    for name in names:
        if not name.endswith(".json"):
            continue
        sidecar = json.loads(storage.read_bytes(f"{SHARDS_DIR}/{name}"))
        if sidecar.get("fingerprint") != spec.fingerprint:
            return f"holds a cache built with spec {sidecar.get('fingerprint', '?')}, not {spec.fingerprint}"
        index = sidecar.get("index", -1)
        if not 0 <= index < len(urls) or sidecar.get("url") != urls[index]:
            return f"holds shard {index} of other input files ({sidecar.get('url')!r})"
    wanted = {f"shard-{i:05d}.{ext}" for i in range(len(urls)) for ext in ("parquet", "json")}
    stray = sorted(n for n in names if n not in wanted and ".tmp-" not in n)
    if stray:
        return f"holds files of another cache ({SHARDS_DIR}/{stray[0]})"
    return None


def _first_difference(old: list[str], new: list[str]) -> str:
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return f"shard {i} was {a!r}, now {b!r}"
    return f"{len(old)} input files then, {len(new)} now"


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
    split_bytes: int | str | None = DEFAULT_SPLIT_BYTES,
) -> BuildCache:
    """The Beam transform of a cache build, whose caller writes ``tokenizer.json`` (once the
    directory is this build's; never, for a dry run)."""
    from beamtok.beam import BuildCache

    return BuildCache(
        spec,
        shards,
        output,
        tokenizer_file=TOKENIZER_FILE,
        row_group_rows=row_group_rows,
        row_group_bytes=row_group_bytes,
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
    split_bytes: int | str | None = DEFAULT_SPLIT_BYTES,
    on_counters: Callable[[dict[str, int]], None] | None = None,
) -> Manifest:
    """Build (or complete) the cache of ``shards`` under ``output``; return its manifest.

    Files larger than ``split_bytes`` (a number of bytes or a size such as ``"256MB"``; None
    or ``"none"``: never) are tokenized in ranges by several workers; the cache is the same either way.
    ``on_counters`` receives the pipeline's Beam counters (documents, ranges, shards written
    and reused...) when the runner reports them."""
    if spec.tokenizer is None:
        raise ConfigError("a cache holds tokens: call tokenize() before cache()")
    from beamtok.beam import BuildCache, beam_counters, is_local, make_pipeline
    from beamtok.beam.options import check_beam_args
    from beamtok.beam.worker_logs import quiet_worker_stderr

    beam_args = check_beam_args(beam_args)
    storage = Storage(output)
    transform = cache_transform(spec, shards, output, row_group_rows=row_group_rows, row_group_bytes=row_group_bytes, split_bytes=split_bytes)
    pipeline = make_pipeline(beam_args)
    _ = pipeline | BuildCache.__name__ >> transform
    local = is_local(pipeline)
    with BuildLock(storage), _write_failures(output):
        prepare_output(storage, spec, shards, overwrite=overwrite)
        transform.write_tokenizer_file()  # where the workers read it
        log.debug("running the build of %d shards into %s with Beam options %s (%s)", len(shards), output, list(beam_args), "local" if local else "remote")
        with contextlib.ExitStack() as stack:
            monitor = None
            if local:
                stream = stack.enter_context(quiet_worker_stderr())
                directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="beamtok-progress-"))
                stack.enter_context(_environment(PROGRESS_DIR_ENV, directory))
                monitor = BuildProgress(storage, len(shards), directory, enabled=progress, stream=stream)
                monitor.start()
            try:
                result = pipeline.run()
                result.wait_until_finish()
            finally:
                if monitor is not None:
                    monitor.stop()
        if not storage.exists(MANIFEST):
            raise CacheError(f"{output}: the pipeline finished but wrote no {MANIFEST}")
        manifest = read_manifest(storage)
    counters = beam_counters(result)
    log.debug("Beam counters %s", json.dumps(counters, sort_keys=True))
    check_counters(counters, manifest)
    if on_counters is not None and counters:
        on_counters(counters)
    return manifest


# Errors of a write that ran out of room: no space, a quota, the file size limit (RLIMIT_FSIZE).
OUT_OF_ROOM = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded", errno.EFBIG: "file too large for the file size limit"}


def out_of_room(error: BaseException) -> str | None:
    """What ran out, if ``error`` (or an error it wraps, or its message when a runner passed
    a worker's error on as text) is a write that found no room."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in OUT_OF_ROOM:
            return OUT_OF_ROOM[current.errno]
        text = str(current)
        for code, what in OUT_OF_ROOM.items():
            if f"[Errno {code}]" in text or f"[errno {code}]" in text or os.strerror(code) in text:
                return what
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def _write_failures(output: str) -> Iterator[None]:
    """Turn a write that found no room into one clear CacheError (files written so far are
    complete: shards are written under temporary names and renamed)."""
    try:
        yield
    except BaseException as e:
        what = out_of_room(e) if not isinstance(e, CacheError) else None
        if what is None:
            raise
        raise CacheError(
            f"{output}: the build stopped writing: {what}. The cache is unfinished; make room (or raise the limit) and "
            f"re-run the same command to complete it: finished shards are kept, no partial file is left under a final name"
        ) from e


def check_counters(counters: dict[str, int], manifest: Manifest) -> None:
    """Documents counted by Beam must equal the manifest's, when every shard was written now."""
    if not counters or counters.get("shards_reused", 0) or counters.get("shards_written", 0) != len(manifest.shards):
        return
    documents = manifest.totals["documents"]
    skipped = {k.removeprefix("skipped_"): v for k, v in counters.items() if k.startswith("skipped_") and k != "skipped_documents" and v}
    found = {"read": counters.get("documents", 0), "emitted": counters.get("emitted_documents", 0), "skipped": skipped}
    want = {"read": documents["read"], "emitted": documents["emitted"], "skipped": {k: v for k, v in documents["skipped"].items() if v}}
    if found != want:
        raise CacheError(f"document counts disagree: Beam counted {found}, the manifest holds {want}")

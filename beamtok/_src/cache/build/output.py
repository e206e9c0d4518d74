"""A cache build's output directory: whose cache it holds, how a rebuild empties it, and the
write errors that end a build. The Beam pipeline itself runs from ``beamtok._src.beam.run``.

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
import os
import re
import tempfile
from collections.abc import Iterator, Sequence

from beamtok._src.base.errors import CacheError
from beamtok._src.cache.build.ranges import LEGACY_RANGES_DIR, RANGES_DIR
from beamtok._src.cache.format.manifest import (
    MANIFEST,
    RECORDS_DIR,
    SHARDS_DIR,
    TOKENIZER_FILE,
    Manifest,
    read_manifest,
)
from beamtok._src.cache.format.shard_table import SHARD_TABLE
from beamtok._src.cache.format.storage import Storage
from beamtok._src.core.spec import Spec, json_differences
from beamtok._src.sources.urls import Shard

__all__ = ["check_counters", "check_output", "other_cache", "out_of_room", "prepare_output", "write_failures"]


def check_output(storage: Storage, *, create: bool = True) -> None:
    """Refuse, before any work, an output directory that cannot be written: an existing file,
    a path under a file, and (``create``: making it now) a directory that cannot be created or
    written (read-only, /proc...). Object stores are checked by their first write."""
    if not storage.is_local:
        return
    path = storage.root
    if os.path.exists(path) and not os.path.isdir(path):
        raise CacheError(f"{path}: is a file, not a directory: choose another --output")
    above = os.path.dirname(path)
    while above and not os.path.exists(above):
        above = os.path.dirname(above)
    if above and not os.path.isdir(above):
        raise CacheError(f"{path}: cannot be created: {above} is a file, not a directory")
    if not create:
        return
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise CacheError(f"{path}: cannot create or write a directory there: {e.strerror or e}") from None


def prepare_output(
    storage: Storage, spec: Spec, shards: Sequence[Shard], *, overwrite: bool, parquet_compat: bool = False
) -> None:
    """Refuse a directory holding another cache, or shard files written with the other
    ``parquet_compat`` choice (unless ``overwrite``, which empties it); mark it unfinished
    until the new manifest is written."""
    problem = other_cache(storage, spec, shards, parquet_compat=parquet_compat)
    if problem is not None and not overwrite:
        raise CacheError(f"{storage.url} {problem}; pass --overwrite to replace it, or choose another --output")
    if overwrite:  # every file of the old cache, of this spec or another
        for folder in (SHARDS_DIR, RECORDS_DIR):
            for name in storage.list(folder):
                storage.delete(f"{folder}/{name}")
        storage.delete(TOKENIZER_FILE)
    storage.delete(MANIFEST)
    storage.delete(SHARD_TABLE)  # a large cache's entries: rewritten with the manifest
    storage.delete_stale_temporaries(SHARDS_DIR)
    storage.delete_stale_temporaries(RECORDS_DIR)
    for folder in (RANGES_DIR, LEGACY_RANGES_DIR):  # tokenized ranges of a killed run: redone
        for name in storage.list(folder):
            storage.delete(f"{folder}/{name}")


def _other_parquet_form(storage: Storage, names: Sequence[str], parquet_compat: bool) -> str | None:
    """What says the directory's shard files (``names``, listed) were written with the other
    ``parquet_compat`` choice, or None. One file tells: a build never adds files of the other
    form (it is refused here), so the files of a directory share one form."""
    written = next((name for name in names if re.fullmatch(r"shard-\d+\.parquet", name)), None)
    if written is None:
        return None
    import pyarrow.parquet as pq

    rel = f"{SHARDS_DIR}/{written}"
    with storage.open_input(rel) as f:
        meta = pq.ParquetFile(f).metadata
    if meta.num_row_groups == 0 or meta.num_columns == 0:
        return None
    compat = meta.row_group(0).column(0).compression == "SNAPPY"
    if compat == parquet_compat:
        return None
    return f"holds shard files written {'with' if compat else 'without'} --parquet-compat ({storage.display(rel)})"


def other_cache(
    storage: Storage, spec: Spec, shards: Sequence[Shard], *, parquet_compat: bool | None = None
) -> str | None:
    """What makes the directory's cache another one than (spec, shards), or None; with
    ``parquet_compat`` given, shard files written with the other choice do too."""
    urls = [s.url for s in shards]
    if storage.exists(MANIFEST):
        try:
            manifest = read_manifest(storage)
        except CacheError:
            return "holds an unreadable manifest"
        if manifest.fingerprint != spec.fingerprint:
            changed = json_differences(manifest.spec, spec.to_json())
            return f"holds a cache built with spec {manifest.fingerprint}, not {spec.fingerprint}" + (
                f" ({changed})" if changed else ""
            )
        old = [e.url for e in manifest.shards]
        if old != urls:
            return f"holds a cache of other input files ({_first_difference(old, urls)})"
    names = storage.list(SHARDS_DIR)
    sidecars = [f"{SHARDS_DIR}/{name}" for name in names if name.endswith(".json")]  # caches written before records/
    sidecars += [f"{RECORDS_DIR}/{name}" for name in storage.list(RECORDS_DIR) if name.endswith(".json")]
    for rel in sidecars:
        sidecar = json.loads(storage.read_bytes(rel))
        if sidecar.get("fingerprint") != spec.fingerprint:
            return f"holds a cache built with spec {sidecar.get('fingerprint', '?')}, not {spec.fingerprint}"
        index = sidecar.get("index", -1)
        if not 0 <= index < len(urls) or sidecar.get("url") != urls[index]:
            return f"holds shard {index} of other input files ({sidecar.get('url')!r})"
    wanted = {f"shard-{i:05d}.{ext}" for i in range(len(urls)) for ext in ("parquet", "json")}
    stray = sorted(n for n in names if n not in wanted and ".tmp-" not in n)
    if stray:
        return f"holds files of another cache ({SHARDS_DIR}/{stray[0]})"
    return None if parquet_compat is None else _other_parquet_form(storage, names, parquet_compat)


def _first_difference(old: list[str], new: list[str]) -> str:
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return f"shard {i} was {a!r}, now {b!r}"
    return f"{len(old)} input files then, {len(new)} now"


# Errors of a write that ran out of room: no space, a quota, the file size limit (RLIMIT_FSIZE).
OUT_OF_ROOM = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large for the file size limit",
}


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
def write_failures(output: str) -> Iterator[None]:
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
    skipped = {
        k.removeprefix("skipped_"): v
        for k, v in counters.items()
        if k.startswith("skipped_") and k != "skipped_documents" and v
    }
    found = {"read": counters.get("documents", 0), "emitted": counters.get("emitted_documents", 0), "skipped": skipped}
    want = {
        "read": documents["read"],
        "emitted": documents["emitted"],
        "skipped": {k: v for k, v in documents["skipped"].items() if v},
    }
    if found != want:
        raise CacheError(f"document counts disagree: Beam counted {found}, the manifest holds {want}")

"""A local, uncompressed, memory-mapped copy of a packed cache's rows, for the global shuffle.

A whole-cache permutation sends each row to any reader at any time. Read from Parquet, every
row can cost the decoding of its whole row group once the cache outgrows a reader's decode
budget; read from a memory-mapped flat file, a row costs a copy of its bytes. The copy is
made once per machine (whatever the number of readers, seeds and epochs) in one sequential
pass over the cache, the way Hugging Face datasets reads Arrow files and Megatron its
indexed ``.bin`` files.

Layout of ``<root>/<key>/``, ``key`` a digest of the cache's URL and its shards' SHA-256s
(a rebuilt cache gets a new copy): ``<column>.bin`` the column's values of all rows, one
after another; ``offsets.bin`` int64, where each row starts (and the end);
``provenance.bin`` int64 ``(rows, 4)``; ``counts.bin`` int64 ``(rows, 5)`` (read, emitted,
truncated and dropped tokens, truncated documents); ``skipped.json`` the few rows whose
documents were skipped, with their reasons; ``rows.json``, written last, the dtypes and
sizes: a directory without it is unfinished. Builders on one machine take turns on a lock
file (the first builds, the others wait and use its copy); a copy is built in a temporary
directory and renamed into place, so a reader never sees half of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from beamtok._src.base.errors import CacheError
from beamtok._src.cache.format.schema import TOKEN_DTYPES
from beamtok._src.cache.read.reader import Cache
from beamtok._src.shards.items import NO_COUNTS, DocCounts
from beamtok._src.shards.rows import RowBlock, columns_of

__all__ = ["LOCAL_ROWS_ENV", "LocalRows", "default_root", "local_rows"]

LOCAL_ROWS_ENV = "BEAMTOK_LOCAL_ROWS"  # where copies go (default ~/.cache/beamtok/local-rows)
FORMAT = 1
COUNT_FIELDS = ("read", "emitted", "truncated_tokens", "dropped_tokens", "truncated_docs")

log = logging.getLogger(__name__)


def default_root() -> str:
    return os.environ.get(LOCAL_ROWS_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "beamtok", "local-rows")


def copy_key(cache: Cache) -> str:
    """Names the copy of exactly this cache's content at this URL."""
    digest = hashlib.sha256(cache.directory.encode())
    for entry in cache.manifest.shards:
        digest.update(f"\n{entry.file} {entry.sha256} {entry.rows}".encode())
    return digest.hexdigest()[:24]


def local_rows(cache: Cache, root: str | None = None) -> LocalRows:
    """The local copy of ``cache``'s rows under ``root``, built first if there is none."""
    base = Path(root or default_root())
    base.mkdir(parents=True, exist_ok=True)
    target = base / copy_key(cache)
    if not (target / "rows.json").exists():
        with _turn(base / f"{target.name}.lock"):
            if not (target / "rows.json").exists():  # another process may have built it meanwhile
                _build(cache, target)
    return LocalRows(str(target), tuple(int(n) for n in cache.manifest.column("rows")))


@contextlib.contextmanager
def _turn(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released by the kernel if this process dies
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(cache: Cache, target: Path) -> None:
    for stale in target.parent.glob(f"{target.name}.tmp-*"):  # left by a builder that died: we hold the lock
        shutil.rmtree(stale, ignore_errors=True)
    totals = cache.manifest.totals
    per_token = sum(dtype.itemsize for dtype in TOKEN_DTYPES.values())
    needed = (totals["tokens"] + totals["pad_tokens"]) * per_token + totals["rows"] * 80  # offsets, provenance, counts
    free = shutil.disk_usage(target.parent).free
    if needed > free:
        raise CacheError(
            f"a local copy of {cache.directory} for the global shuffle needs about {needed / 1e9:.1f} GB; "
            f"{target.parent} has {free / 1e9:.1f} GB free. Point {LOCAL_ROWS_ENV} (or global_shuffle(local_copy=...)) "
            "at a larger disk, or pass local_copy=False to decode row groups in memory"
        )
    temporary = target.parent / f"{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    temporary.mkdir()
    start = time.perf_counter()
    try:
        about = _write(cache, temporary)
        (temporary / "rows.json").write_text(json.dumps(about))
        os.replace(temporary, target)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    log.info(
        "local copy of %s for the global shuffle: %d rows, %.1f GB in %s (%.1f s)",
        cache.directory,
        about["rows"],
        about["bytes"] / 1e9,
        target,
        time.perf_counter() - start,
    )


def _write(cache: Cache, directory: Path) -> dict[str, Any]:
    files: dict[str, BinaryIO] = {}
    dtypes: dict[str, str] = {}
    names: list[str] | None = None
    skipped: dict[str, dict[str, int]] = {}
    rows = 0
    end = 0
    supervised = cache.supervised
    try:
        for name in ("offsets", "provenance", "counts"):
            files[name] = open(directory / f"{name}.bin", "wb")
        files["offsets"].write(np.zeros(1, dtype=np.int64).tobytes())
        for block in cache.all_blocks():
            if not len(block):
                continue
            if not block.columns:
                raise CacheError(f"{cache.directory}: its rows are not token rows; a local copy holds token rows only")
            if names is None:
                names = list(block.columns)
                for name in names:
                    files[name] = open(directory / f"{name}.bin", "wb")
                    dtypes[name] = block.columns[name].values.dtype.str
            elif list(block.columns) != names:
                raise CacheError(
                    f"{cache.directory}: shard {int(block.shard[0])} holds other fields ({list(block.columns)}) than {names}"
                )
            first = block.columns[names[0]].offsets
            for name in names:
                column = block.columns[name]
                files[name].write(
                    np.ascontiguousarray(
                        column.values[column.offsets[0] : column.offsets[-1]], dtype=dtypes[name]
                    ).tobytes()
                )
            files["offsets"].write((first[1:] - first[0] + end).astype(np.int64).tobytes())
            end += int(first[-1] - first[0])
            provenance = np.stack(block.provenance, axis=1).astype(np.int64)
            files["provenance"].write(provenance.tobytes())
            counts = np.zeros((len(block), len(COUNT_FIELDS)), dtype=np.int64)
            for row in block.busy:
                c = block.counts[row]
                counts[row] = [getattr(c, name) for name in COUNT_FIELDS]
                if c.skipped:
                    skipped[str(rows + row)] = dict(c.skipped)
            files["counts"].write(counts.tobytes())
            rows += len(block)
    finally:
        for handle in files.values():
            handle.close()
    if names is None:
        raise CacheError(f"{cache.directory}: the cache holds no rows to copy")
    (directory / "skipped.json").write_text(json.dumps(skipped))
    size = sum(os.path.getsize(directory / f"{name}.bin") for name in [*names, "offsets", "provenance", "counts"])
    return {
        "format": FORMAT,
        "cache": cache.directory,
        "rows": rows,
        "columns": dtypes,
        "supervised": supervised,
        "bytes": size,
    }


class LocalRows:
    """Rows of a local copy by global row number, read through memory maps."""

    def __init__(self, directory: str, shard_rows: tuple[int, ...]) -> None:
        self.directory = directory
        self.shard_rows = shard_rows  # the cache's, in shard order
        about = json.loads(Path(directory, "rows.json").read_text())
        if about.get("format") != FORMAT:
            raise CacheError(
                f"{directory}: a local copy of format {about.get('format')}, not {FORMAT}; delete it to rebuild"
            )
        self.total: int = about["rows"]
        self.supervised: bool = about["supervised"]
        self.columns = {name: self._map(name, np.dtype(dtype)) for name, dtype in about["columns"].items()}
        self.offsets = self._map("offsets", np.dtype(np.int64))
        self.provenance = self._map("provenance", np.dtype(np.int64)).reshape(-1, 4)
        self.counts = self._map("counts", np.dtype(np.int64)).reshape(-1, len(COUNT_FIELDS))
        self.skipped = {
            int(row): reasons for row, reasons in json.loads(Path(directory, "skipped.json").read_text()).items()
        }
        widths = np.diff(self.offsets) if self.total else np.zeros(0, dtype=np.int64)
        self.width = int(widths[0]) if self.total and bool((widths == widths[0]).all()) else None

    def _map(self, name: str, dtype: np.dtype) -> np.ndarray:
        path = Path(self.directory, f"{name}.bin")
        if path.stat().st_size == 0:
            return np.zeros(0, dtype=dtype)
        return np.memmap(path, dtype=dtype, mode="r")

    def decode_ahead(self, global_rows: np.ndarray, keep: int) -> None:
        """Nothing to decode: the copy is memory-mapped."""

    def block(self, global_rows: np.ndarray) -> RowBlock:
        """These rows, in the order given, as one block."""
        rows = np.asarray(global_rows, dtype=np.int64)
        if self.width is not None:
            offsets = np.arange(len(rows) + 1, dtype=np.int64) * self.width
            fields = [
                (name, np.asarray(values.reshape(-1, self.width)[rows]).reshape(-1))
                for name, values in self.columns.items()
            ]
        else:
            starts, ends = self.offsets[rows], self.offsets[rows + 1]
            offsets = np.zeros(len(rows) + 1, dtype=np.int64)
            np.cumsum(ends - starts, out=offsets[1:])
            fields = [
                (name, np.concatenate([values[a:b] for a, b in zip(starts.tolist(), ends.tolist())]))
                for name, values in self.columns.items()
            ]
        counts_rows = np.asarray(self.counts[rows])
        busy = np.flatnonzero(counts_rows[:, 0] | counts_rows[:, 2] | counts_rows[:, 3]).tolist()
        counts = [NO_COUNTS] * len(rows)
        for i in busy:
            read, emitted, truncated_tokens, dropped_tokens, truncated_docs = counts_rows[i].tolist()
            skipped = self.skipped.get(int(rows[i]), {})
            counts[i] = DocCounts(read, emitted, skipped, truncated_tokens, dropped_tokens, truncated_docs)
        provenance = np.asarray(self.provenance[rows])
        return RowBlock(
            columns_of(fields, offsets),
            counts,
            (provenance[:, 0].copy(), provenance[:, 1].copy(), provenance[:, 2].copy(), provenance[:, 3].copy()),
            self.supervised,
            busy=busy,
        )

    def close(self) -> None:
        """Memory maps close with their arrays."""

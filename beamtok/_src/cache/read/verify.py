"""Check a cache against its manifest and against the shard processing re-run on the fly."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import numpy as np
import pyarrow.parquet as pq

from beamtok._src.base.errors import BeamtokError
from beamtok._src.base.progress import Progress
from beamtok._src.cache.format.shard_table import table_sha256
from beamtok._src.cache.read.reader import Cache, size_problem
from beamtok._src.shards.items import ShardCursor
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.sources.urls import Shard, is_remote, split_range

__all__ = ["VerifyReport", "verify_cache"]


@dataclass
class VerifyReport:
    """What verify checked and what it found; ``ok`` when nothing.

    Attributes:
        shards: Shards the manifest lists.
        files_checked: Shard files whose size and SHA-256 were checked.
        shards_compared: The shards re-run from their inputs and compared row by row.
        rows_compared: Rows compared in them.
        problems: Each problem found, naming its file.
        repairable: A shard file was altered: re-running the build rebuilds it.
    """

    shards: int = 0
    files_checked: int = 0
    shards_compared: list[int] = field(default_factory=list)
    rows_compared: int = 0
    problems: list[str] = field(default_factory=list)
    repairable: bool = False  # a shard file was altered: re-running the build rebuilds it

    REPAIR = (
        "to repair: re-run the `beamtok cache` command that built the cache: a shard whose file fails its checksum "
        "is rebuilt, the others are kept (--overwrite rebuilds every shard)"
    )

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_cache(
    directory: str,
    *,
    sample: int = 2,
    seed: int = 0,
    fingerprint: str | None = None,
    progress: bool = False,
    source_root: str | None = None,
) -> VerifyReport:
    """Check every shard file (present, size, SHA-256, row count), then re-run the per-shard
    step on some shards and compare every row and field.

    Args:
        directory: The cache directory (a local path or URL).
        sample: How many randomly chosen shards to re-run (all if there are fewer).
        seed: Chooses those shards.
        fingerprint: The spec the cache must have been built with, when given.
        progress: Show the bytes checked and rows compared.
        source_root: Stands for the build's directory when the inputs have moved (inputs are
            otherwise found from any working directory; see ``Manifest.input_path``).

    Returns:
        What was checked and every problem found, each naming its file.

    Raises:
        CacheError: The manifest is missing or malformed, or built with another spec.
    """
    cache = Cache(directory, fingerprint=fingerprint, check_files=False)  # file problems are reported below
    manifest = cache.manifest
    report = VerifyReport(shards=len(manifest.shards))
    if (
        manifest.shard_table is not None
        and table_sha256(cache.storage, manifest.shard_table) != manifest.shard_table["sha256"]
    ):
        report.problems.append(
            f"{cache.storage.display(manifest.shard_table['file'])}: SHA-256 differs from the manifest's (the shard table was altered); "
            "its entries cannot be trusted, so no shard was checked: rebuild with `beamtok cache --overwrite`"
        )
        return report
    intact: list[int] = []
    sizes = cache.file_sizes()
    total_mb = sum(entry.bytes for entry in manifest.shards) / 1e6
    checked = Progress(round(total_mb, 1), "verify checksums", "MB", enabled=progress)
    done = 0
    for entry in manifest.shards:
        where = f"shard {entry.index} ({cache.storage.display(entry.file)})"
        problem = size_problem(entry, sizes[entry.file])
        if problem is not None:
            report.problems.append(f"{where}: {problem}")
            continue

        def read(count: int) -> None:
            nonlocal done
            done += count
            checked.set(round(done / 1e6, 1))

        digest = cache.storage.sha256(entry.file, read)
        report.files_checked += 1
        if digest != entry.sha256:
            report.problems.append(f"{where}: checksum mismatch (the file was altered after it was written)")
            report.repairable = True
            continue
        with cache.storage.open_input(entry.file) as f:
            rows = pq.ParquetFile(f).metadata.num_rows
        if rows != entry.rows:
            report.problems.append(f"{where}: {rows} rows, the manifest says {entry.rows}")
            continue
        intact.append(entry.index)
    checked.close()
    if sample > 0 and intact:
        cache.tokenizer()
        processor = ShardProcessor(cache.spec)
        chosen = sorted(random.Random(seed).sample(intact, min(sample, len(intact))))
        with Progress(sum(manifest.shards[i].rows for i in chosen), "verify re-run", "rows", enabled=progress) as rerun:
            for index in chosen:
                report.shards_compared.append(index)
                url = manifest.shards[index].url
                path = manifest.input_path(url, source_root)
                if (
                    not is_remote(path)
                    and not path.startswith("memory://")
                    and not os.path.exists(split_range(path)[0])
                ):
                    hint = (
                        "pass --source-root DIR (the directory that now holds the inputs)"
                        if source_root is None
                        else "check --source-root"
                    )
                    report.problems.append(f"shard {index}: cannot re-run: input {url} is not at {path}; {hint}")
                    continue
                problem = _compare_shard(cache, processor, Shard(index, path), report, rerun)
                if problem:
                    report.problems.append(problem)
    return report


def _compare_shard(
    cache: Cache, processor: ShardProcessor, shard: Shard, report: VerifyReport, progress: Progress
) -> str | None:
    fresh = processor.pack(shard.index, processor.documents(shard))
    stored = cache.open_rows(shard, ShardCursor())
    row = 0
    try:
        for row, (want, got) in enumerate(zip(fresh, stored, strict=True)):
            report.rows_compared += 1
            progress.set(report.rows_compared)
            if (want.example is None) != (got.example is None):
                return f"shard {shard.index} row {row}: one side has no example"
            if want.example is not None and got.example is not None:
                for name, value in want.example.items():
                    other = got.example.get(name)
                    same = (
                        bool(np.array_equal(value, np.asarray(other)))
                        if isinstance(value, np.ndarray)
                        else value == other
                    )
                    if not same:
                        return f"shard {shard.index} row {row} field {name!r} differs from the on-the-fly result"
            if want.cursor != got.cursor:
                return f"shard {shard.index} row {row}: cursor after it differs ({got.cursor} vs {want.cursor})"
    except BeamtokError as e:  # before ValueError: ConfigError and StateError are ValueErrors too
        return f"shard {shard.index}: cannot re-run the shard processing: {e}"
    except ValueError:
        return f"shard {shard.index}: the cache has a different number of rows than the on-the-fly run (first {row + 1} agree)"
    return None

"""Ranges of a file: where a large file is cut so that several workers or readers share it.

The Beam build cuts a large file into ranges to tokenize them in parallel; the stream cuts
files into ranges when they are fewer than its readers (``Dataset.from_files(split_bytes=)``).
Both cut at the same bounds, computed here:

- uncompressed JSONL: byte offsets. ``ceil(size / split_bytes)`` equal cut points, each moved
  to the first line start at or after it (a line belongs to the range holding its first byte,
  as in Beam's text source), so every bound is a doc cursor;
- Parquet: row indices starting runs of whole row groups of about ``split_bytes`` compressed;
- anything else cannot be entered in the middle (a compressed stream, a text file that is one
  document, an Arrow or MDS file read whole): one range.

A range of a file read as a shard of its own is named by its URL with ``#range=START-STOP``
appended (``STOP`` empty: to the end): ``beamtok._src.sources.urls.range_url`` and ``split_range``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from beamtok._src.base.errors import InputError
from beamtok._src.sources.opening import is_compressed, open_url
from beamtok._src.sources.urls import Shard, is_remote, range_url, split_range

__all__ = ["AUTO", "AUTO_RANGES", "AUTO_RANGE_BYTES", "cut_files", "file_bounds"]

ALIGN_READ = 1 << 16
AUTO = "auto"
AUTO_RANGES = 64  # "auto": a file is cut into this many ranges...
AUTO_RANGE_BYTES = 16 << 20  # ...or into ranges of at most this size when that makes more

SplitBytes = int | str  # a size in bytes, or AUTO


def _split_for(size: int, split_bytes: SplitBytes) -> int:
    """The range size ``split_bytes`` means for a file of ``size`` bytes."""
    if split_bytes == AUTO:
        return max(1, min(AUTO_RANGE_BYTES, -(-size // AUTO_RANGES)))
    assert isinstance(split_bytes, int)
    return split_bytes


def cut_files(shards: Sequence[Shard], fmt_of: Callable[[str], str], split_bytes: SplitBytes) -> tuple[Shard, ...]:
    """``shards`` with every file that can be cut replaced by its ranges (each a shard named by
    its range URL), renumbered in order; ``fmt_of(url)`` is the format a file is read in.
    ``split_bytes``: a size, or ``"auto"`` (``AUTO_RANGES`` ranges a file, or ranges of
    ``AUTO_RANGE_BYTES`` when that makes more). A file of one line, or too small to cut,
    stays whole."""
    out: list[Shard] = []
    for shard in shards:
        url, first, stop = split_range(shard.url)
        found = (
            None if shard.data is not None or (first, stop) != (0, None) else file_bounds(url, fmt_of(url), split_bytes)
        )
        if found is None or len(found[0]) <= 2:
            out.append(Shard(len(out), shard.url, shard.data))
            continue
        bounds = found[0]
        for i in range(len(bounds) - 1):
            out.append(Shard(len(out), range_url(url, bounds[i], bounds[i + 1] if i + 2 < len(bounds) else None)))
    return tuple(out)


def file_bounds(url: str, fmt: str, split_bytes: SplitBytes) -> tuple[list[int], int] | None:
    """The bounds ``[0, b1, ..., end]`` the file at ``url`` (read as ``fmt``) is cut at, and
    what they count to (bytes or rows); None for a file that is not cut (one range)."""
    if fmt == "jsonl" and not is_compressed(url):
        return _jsonl_bounds(url, split_bytes)
    if fmt == "parquet":
        return _parquet_bounds(url, split_bytes)
    return None


def _jsonl_bounds(url: str, split_bytes: SplitBytes) -> tuple[list[int], int]:
    """0, the first line start at or after each of ``ceil(size / split_bytes)`` equal cut
    points, then the size. Ranges of equal size (not ``split_bytes`` and a remainder) keep
    workers evenly loaded: runners and readers deal ranges out by count."""
    bounds = [0]
    with open_url(url, decompress=False) as f:
        size = int(f.seek(0, 2))
        count = max(1, -(-size // _split_for(size, split_bytes)))
        for k in range(1, count):
            point = max(k * size // count, bounds[-1] + 1)
            start = _line_start_at_or_after(f, point, size)
            if start >= size:
                break
            if start > bounds[-1]:
                bounds.append(start)
    bounds.append(size)
    return bounds, size


def _line_start_at_or_after(f: Any, point: int, size: int) -> int:
    f.seek(point - 1)
    at = point - 1
    while at < size:
        chunk = f.read(ALIGN_READ)
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(chunk)
    return size


def _parquet_bounds(url: str, split_bytes: SplitBytes) -> tuple[list[int], int]:
    """Row indices starting runs of whole row groups of about ``split_bytes`` (compressed)."""
    import pyarrow.parquet as pq

    source: Any = url if not is_remote(url) else open_url(url, decompress=False)
    try:
        metadata = pq.ParquetFile(source).metadata
    except Exception as e:
        raise InputError(f"{url}: not a readable Parquet file: {e}") from e
    groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
    sizes = [sum(group.column(c).total_compressed_size for c in range(group.num_columns)) for group in groups]
    split = _split_for(sum(sizes), split_bytes)
    bounds = [0]
    row = size = 0
    for group, group_size in zip(groups, sizes):
        if size >= split and row > bounds[-1]:
            bounds.append(row)
            size = 0
        size += group_size
        row += group.num_rows
    bounds.append(row)
    return bounds, row

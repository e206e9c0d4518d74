"""Turn user URL patterns into the ordered list of shards."""

from __future__ import annotations

import difflib
import glob
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from braceexpand import braceexpand

from beamtok._src.base.errors import ConfigError, InputError

__all__ = [
    "RANGE_MARK",
    "Shard",
    "check_bucket_names",
    "expand_urls",
    "is_remote",
    "local_path",
    "nearest_name",
    "range_url",
    "split_range",
]

REMOTE_PREFIXES = ("s3://", "gs://", "gcs://", "http://", "https://", "az://", "abfs://", "hdfs://")
GLOB_CHARS = ("*", "?", "[")
RANGE_MARK = "#range="  # a file range read as a shard of its own: beamtok._src.sources.byte_ranges
_RANGE = re.compile(r"#range=(\d+)-(\d*)$")


@dataclass(frozen=True)
class Shard:
    """One unit of ordered work: an input file, or an in-memory source. ``root``: the
    directory a relative local ``url`` was given in (a build's workers may run elsewhere,
    as a Dask worker started in another directory does); it is where the file is opened,
    never part of what the shard is.

    Attributes:
        index: The shard's number in the dataset's order.
        url: Its file (or a name for in-memory data).
        data: In-memory data (None for a file).
        root: The shard it was cut from, for a range.
    """

    index: int
    url: str
    data: Any = field(default=None, compare=False, repr=False)
    root: str | None = field(default=None, compare=False, repr=False)

    def location(self) -> str:
        """The URL to open: ``url``, under ``root`` when it is a relative local path."""
        if (
            self.root is None
            or self.data is not None
            or is_remote(self.url)
            or self.url.startswith("file://")
            or os.path.isabs(self.url)
        ):
            return self.url
        return os.path.join(self.root, self.url)


def range_url(url: str, start: int, stop: int | None) -> str:
    """The URL naming doc cursors ``[start, stop)`` of the file at ``url``."""
    return f"{url}{RANGE_MARK}{start}-{'' if stop is None else stop}"


def split_range(url: str) -> tuple[str, int, int | None]:
    """``(file URL, first doc cursor, stop cursor or None)`` of a URL :func:`range_url` made;
    a plain URL is the whole file ``(url, 0, None)``."""
    match = _RANGE.search(url)
    if match is None:
        return url, 0, None
    start, stop = int(match.group(1)), int(match.group(2)) if match.group(2) else None
    if stop is not None and stop <= start:
        raise ConfigError(f"{url}: an empty range")
    return url[: match.start()], start, stop


def is_remote(url: str) -> bool:
    return url.startswith(REMOTE_PREFIXES)


def local_path(url: str) -> str:
    """The file path of a local URL (``file://`` stripped)."""
    return url[len("file://") :] if url.startswith("file://") else url


def expand_urls(patterns: str | Iterable[str]) -> list[str]:
    """Expand brace patterns and local globs into a de-duplicated, ordered list of URLs.

    Brace patterns keep their written order; each local glob is sorted. A pattern that matches
    nothing, or a local file that does not exist, is an error naming the pattern.

    Args:
        patterns: A URL, path or pattern, or several.
    Returns:
        The URLs, in order, each once.
    Raises:
        ConfigError: A pattern matches nothing, or a local file does not exist.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [os.fspath(patterns)]
    urls: list[str] = []
    seen: set[str] = set()
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if not pattern:
            raise ConfigError("empty URL pattern")
        for expanded in braceexpand(pattern):
            for url in _expand_one(expanded, pattern):
                if url not in seen:
                    seen.add(url)
                    urls.append(url)
    if not urls:
        raise ConfigError("no input URLs given")
    return urls


def _expand_one(url: str, pattern: str) -> list[str]:
    if is_remote(url):
        return [url]
    if _RANGE.search(url):  # a range of one file, as a cut dataset names it
        base = split_range(url)[0]
        if not os.path.isfile(local_path(base)):
            raise InputError(f"{local_path(base)}: file not found{nearest_name(local_path(base))}")
        return [url]
    path = local_path(url)
    if any(c in path for c in GLOB_CHARS):
        matches = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        if not matches:
            raise InputError(
                f"{pattern}: pattern matches no file{nearest_name(os.path.dirname(path)) if not os.path.isdir(os.path.dirname(path) or '.') else ''}"
            )
        return matches
    try:
        is_dir = stat.S_ISDIR(os.stat(path).st_mode)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found{nearest_name(path)}") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied (a directory on the way cannot be searched)") from None
    if is_dir:
        raise InputError(f"{path}: is a directory; give a file or a glob such as {path}/*.jsonl")
    return [path]


def nearest_name(path: str) -> str:
    """``; did you mean '...'?`` naming the existing file or directory closest to ``path``
    (beside it, or beside the first of its parents that exists), or ''."""
    missing = os.path.normpath(path)
    parent = os.path.dirname(missing)
    while parent and not os.path.isdir(parent):
        missing, parent = parent, os.path.dirname(parent)
    try:
        names = os.listdir(parent or ".")
    except OSError:
        return ""
    close = difflib.get_close_matches(os.path.basename(missing), names, n=1, cutoff=0.6)
    return f"; did you mean {os.path.join(parent, close[0])!r}?" if close else ""


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")


def check_bucket_names(values: Iterable[str], where: str = "") -> None:
    """Refuse an ``s3://`` or ``gs://`` URL whose bucket name the store would reject (3 to 63
    lower-case letters, digits, dots, dashes and, on GCS, underscores; a letter or digit at
    each end), before a client tries it: a placeholder such as ``gs://BUCKET`` would otherwise
    send a runner looking for, or creating, that bucket over the network."""
    for value in values:
        url = value.split("=", 1)[1] if value.startswith("--") and "=" in value else value
        scheme, _, rest = url.partition("://")
        if scheme not in ("s3", "gs") or not rest:
            continue
        bucket = rest.split("/", 1)[0]
        allowed = _BUCKET.match(bucket) is not None and (scheme == "gs" or "_" not in bucket) and ".." not in bucket
        if not allowed:
            raise ConfigError(
                f"{where}{url}: {bucket!r} is not a valid {scheme}:// bucket name (3-63 lower-case letters, digits, dots "
                f"and dashes{', underscores' if scheme == 'gs' else ''}, a letter or digit at each end): "
                "replace the placeholder with your bucket"
            )

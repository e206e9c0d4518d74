"""Turn user URL patterns into the ordered list of shards."""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from braceexpand import braceexpand

from beamtok.errors import ConfigError, InputError

__all__ = ["Shard", "expand_urls", "is_remote", "local_path"]

REMOTE_PREFIXES = ("s3://", "gs://", "gcs://", "http://", "https://", "az://", "abfs://", "hdfs://")
GLOB_CHARS = ("*", "?", "[")


@dataclass(frozen=True)
class Shard:
    """One unit of ordered work: an input file, or an in-memory source."""

    index: int
    url: str
    data: Any = field(default=None, compare=False, repr=False)


def is_remote(url: str) -> bool:
    return url.startswith(REMOTE_PREFIXES)


def local_path(url: str) -> str:
    """The file path of a local URL (``file://`` stripped)."""
    return url[len("file://") :] if url.startswith("file://") else url


def expand_urls(patterns: str | Iterable[str]) -> list[str]:
    """Expand brace patterns and local globs into a de-duplicated, ordered list of URLs.

    Brace patterns keep their written order; each local glob is sorted. A pattern that matches
    nothing, or a local file that does not exist, is an error naming the pattern.
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
    path = local_path(url)
    if any(c in path for c in GLOB_CHARS):
        matches = sorted(p for p in glob.glob(path) if os.path.isfile(p))
        if not matches:
            raise InputError(f"{pattern}: pattern matches no file")
        return matches
    try:
        is_dir = stat.S_ISDIR(os.stat(path).st_mode)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied (a directory on the way cannot be searched)") from None
    if is_dir:
        raise InputError(f"{path}: is a directory; give a file or a glob such as {path}/*.jsonl")
    return [path]

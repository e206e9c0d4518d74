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

from beamtok.base.errors import ConfigError, InputError

__all__ = ["Shard", "check_bucket_names", "expand_urls", "is_remote", "local_path", "nearest_name"]

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
            raise InputError(f"{pattern}: pattern matches no file{nearest_name(os.path.dirname(path)) if not os.path.isdir(os.path.dirname(path) or '.') else ''}")
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

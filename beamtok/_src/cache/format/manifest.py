"""The cache manifest: what was built, with which spec, and how to check every file.

``manifest.json`` is written last, so a directory without one is an unfinished cache. Each
shard also gets a small sidecar (``records/shard-NNNNN.json``) as soon as its Parquet file is
in place; a re-run skips shards whose sidecar has the same spec fingerprint. The sidecars live
apart from ``shards/`` so that folder holds Parquet files alone: pyarrow, polars, Spark and
``datasets`` pointed at it read it as one dataset (caches of earlier versions kept them in
``shards/``, where they are still found).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from beamtok._src.base.errors import CacheError
from beamtok._src.cache.format.manifest_entry import ShardEntry
from beamtok._src.cache.format.shard_table import INLINE_SHARDS, ShardTable, read_shard_table, write_shard_table
from beamtok._src.cache.format.storage import Storage, check_relative
from beamtok._src.sources.urls import is_remote, range_url, split_range

__all__ = [
    "MANIFEST",
    "MANIFEST_FORMAT",
    "RECORDS_DIR",
    "Manifest",
    "ShardEntry",
    "legacy_sidecar_file",
    "read_manifest",
    "shard_file",
    "sidecar_file",
    "versions",
    "write_manifest",
]

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 2  # 2: shard files of layout 2 (see beamtok._src.cache.format.schema)
TABLE_FORMAT = (
    3  # 3: format 2 with the shard entries in a table beside the manifest (beamtok._src.cache.format.shard_table)
)
READABLE_FORMATS = (1, 2, 3)
SHARDS_DIR = "shards"
RECORDS_DIR = "records"
TOKENIZER_FILE = "tokenizer.json"


def shard_file(index: int) -> str:
    return f"{SHARDS_DIR}/shard-{index:05d}.parquet"


def sidecar_file(index: int) -> str:
    return f"{RECORDS_DIR}/shard-{index:05d}.json"


def legacy_sidecar_file(index: int) -> str:
    """Where caches written before ``records/`` kept shard ``index``'s sidecar."""
    return f"{SHARDS_DIR}/shard-{index:05d}.json"


@dataclass
class Manifest:
    """A cache's ``manifest.json``: the spec it was built with and one entry per shard.

    Attributes:
        spec: The build's spec, as ``Spec.to_json`` writes it.
        fingerprint: The spec's fingerprint; a reader with another spec is refused.
        shards: One entry per shard in shard order (a list, or a table read from a large cache).
        versions: The versions of beamtok and the libraries that built the cache.
        tokenizer_file: Where the cache keeps its tokenizer, relative to the cache root.
        created: When the manifest was written (UTC, ISO 8601).
        format: The manifest's format number (1, 2 or 3).
        input_root: The directory relative local input paths were given in.
        shard_table: Where the entries are when they are not inline (format 3).
    """

    spec: dict[str, Any]
    fingerprint: str
    shards: Sequence[ShardEntry]  # a list, or a ShardTable read from a large cache
    versions: dict[str, str] = field(default_factory=dict)
    tokenizer_file: str | None = None
    created: str = ""
    format: int = MANIFEST_FORMAT
    input_root: str | None = None  # the directory relative local input paths were given in
    shard_table: dict[str, Any] | None = (
        None  # where the entries are, when not inline (beamtok._src.cache.format.shard_table)
    )
    _columns: dict[str, Sequence[Any]] = field(default_factory=dict, repr=False, compare=False)

    def input_path(self, url: str, source_root: str | None = None) -> str:
        """Where to read input ``url`` now: a relative local path is taken from the directory
        the build ran in (``input_root``); ``source_root`` stands for that directory after
        the inputs moved, for relative paths and for absolute paths under it.

        Args:
            url: An input as the manifest names it (a byte range suffix is kept).
            source_root: Where the build's directory is now, if the inputs moved.
        """
        if is_remote(url) or url.startswith("memory://"):
            return url
        whole, start, stop = split_range(url)
        if whole != url:  # a byte range of a file: the file moves, the range stays
            return range_url(self.input_path(whole, source_root), start, stop)
        path = url[len("file://") :] if url.startswith("file://") else url
        root = self.input_root
        if source_root is not None:
            if not os.path.isabs(path):
                return os.path.join(source_root, path)
            if root is not None and os.path.commonpath([root, path]) == root:
                return os.path.join(source_root, os.path.relpath(path, root))
            return path
        if not os.path.isabs(path) and root is not None:
            return os.path.join(root, path)
        return path

    def column(self, name: str) -> Sequence[Any]:
        """One field of every shard entry, in shard order (a table reads it as a column, once;
        a list, which a cache being written still grows, is read each time).

        Args:
            name: A field of ``ShardEntry`` (``rows``, ``file``, ``tokens``...).
        """
        if not isinstance(self.shards, ShardTable):
            return [getattr(entry, name) for entry in self.shards]
        if name not in self._columns:
            self._columns[name] = self.shards.column(name)
        return self._columns[name]

    def distinct(self, name: str) -> set[Any]:
        """The distinct values of one field over every shard entry.

        Args:
            name: A field of ``ShardEntry``.
        """
        return (
            self.shards.distinct(name)
            if isinstance(self.shards, ShardTable)
            else {getattr(e, name) for e in self.shards}
        )

    def shard_rows(self, index: int) -> int:
        """Rows of a shard, without building its entry.

        Args:
            index: The shard's number.
        """
        return int(self.column("rows")[index]) if isinstance(self.shards, ShardTable) else self.shards[index].rows

    @property
    def totals(self) -> dict[str, Any]:
        skipped: dict[str, int] = {}
        read = emitted = truncated = 0
        for s in self.shards:  # one pass: a table builds each entry once
            documents = s.documents
            read += documents["read"]
            emitted += documents["emitted"]
            truncated += documents["truncated_docs"]
            for reason, n in documents["skipped"].items():
                skipped[reason] = skipped.get(reason, 0) + n
        docs = {"read": read, "emitted": emitted, "skipped": dict(sorted(skipped.items())), "truncated": truncated}
        return {
            "shards": len(self.shards),
            "rows": int(sum(self.column("rows"))),
            "tokens": int(sum(self.column("tokens"))),
            "pad_tokens": int(sum(self.column("pad_tokens"))),
            "bytes": int(sum(self.column("bytes"))),
            "documents": docs,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "fingerprint": self.fingerprint,
            "spec": self.spec,
            "versions": self.versions,
            "tokenizer_file": self.tokenizer_file,
            "created": self.created or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "input_root": self.input_root,
            "totals": self.totals,
            "shards": [s.to_json() for s in self.shards],
        }

    @classmethod
    def from_json(cls, data: Any, where: str, storage: Storage | None = None) -> Manifest:
        """The manifest a parsed ``manifest.json`` holds.

        Args:
            data: The parsed JSON.
            where: The manifest's location, for error messages.
            storage: The cache's storage, to read a format-3 manifest's shard table from.

        Raises:
            CacheError: ``data`` is not a manifest this beamtok reads.
        """
        if not isinstance(data, dict) or "format" not in data:
            raise CacheError(f"{where}: not a beamtok manifest")
        if data["format"] not in READABLE_FORMATS:
            readable = ", ".join(map(str, READABLE_FORMATS))
            raise CacheError(
                f"{where}: manifest format {data['format']!r} is not supported (this beamtok reads formats {readable}); upgrade beamtok"
            )
        try:
            shards: Sequence[ShardEntry]
            if data["format"] == TABLE_FORMAT:
                if storage is None:
                    raise CacheError(
                        f"{where}: the shard entries are in a table beside the manifest; open the cache directory"
                    )
                shards = read_shard_table(storage, data["shard_table"], where)
            else:
                shards = [ShardEntry.from_json(s, where) for s in data["shards"]]
            manifest = cls(
                data["spec"],
                data["fingerprint"],
                shards,
                data["versions"],
                data["tokenizer_file"],
                data["created"],
                input_root=data.get("input_root"),  # absent from manifests of earlier versions
                format=data["format"],
                shard_table=data.get("shard_table"),
            )
        except KeyError as e:
            raise CacheError(f"{where}: manifest lacks {e}") from e
        if manifest.tokenizer_file is not None:
            check_relative(manifest.tokenizer_file)
        if isinstance(shards, list) and [s.index for s in shards] != list(range(len(shards))):
            raise CacheError(f"{where}: shard entries are not numbered 0..{len(shards) - 1}")
        return manifest


def read_manifest(storage: Storage) -> Manifest:
    """Read and validate a cache's manifest; a missing one means the cache is unfinished.

    Args:
        storage: The cache directory's storage.

    Raises:
        CacheError: No manifest (an unfinished cache, or not a cache), or one not valid.
    """
    if not storage.exists(MANIFEST):
        if storage.list(SHARDS_DIR) or storage.list(RECORDS_DIR):
            raise CacheError(
                f"{storage.url}: cache is unfinished (shard files but no {MANIFEST}); re-run `beamtok cache` to complete it"
            )
        raise CacheError(f"{storage.url}: not a beamtok cache (no {MANIFEST})")
    where = storage.display(MANIFEST)
    try:
        data = json.loads(storage.read_bytes(MANIFEST))
    except json.JSONDecodeError as e:
        raise CacheError(f"{where}: not valid JSON: {e}") from e
    return Manifest.from_json(data, where, storage)


def write_manifest(storage: Storage, manifest: Manifest, inline_limit: int | None = None) -> dict[str, Any]:
    """Write ``manifest`` (last, so a cache with a manifest is finished); past ``inline_limit``
    shards (default ``INLINE_SHARDS``) the entries go to a table beside it. Returns its JSON."""
    data = manifest.to_json()
    if len(manifest.shards) > (INLINE_SHARDS if inline_limit is None else inline_limit):
        data["format"] = TABLE_FORMAT
        data["shard_table"] = write_shard_table(storage, manifest.shards)
        del data["shards"]
    storage.write_bytes(MANIFEST, json.dumps(data, indent=1).encode())
    return data


def versions() -> dict[str, str]:
    """Versions recorded in a cache's manifest (of installed distributions: nothing is imported)."""
    import sys
    from importlib import metadata

    found = {}
    for key, distribution in (
        ("beamtok", "beamtok"),
        ("apache_beam", "apache-beam"),
        ("tokenizers", "tokenizers"),
        ("pyarrow", "pyarrow"),
        ("transformers", "transformers"),
    ):
        try:
            found[key] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            pass
    found["python"] = sys.version.split()[0]
    return found

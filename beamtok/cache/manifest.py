"""The cache manifest: what was built, with which spec, and how to check every file.

``manifest.json`` is written last, so a directory without one is an unfinished cache. Each
shard also gets a small sidecar (``shards/shard-NNNNN.json``) as soon as its Parquet file is
in place; a re-run skips shards whose sidecar has the same spec fingerprint.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from beamtok.cache.storage import Storage, check_relative
from beamtok.errors import CacheError
from beamtok.sources.urls import is_remote

__all__ = ["MANIFEST", "MANIFEST_FORMAT", "Manifest", "ShardEntry", "read_manifest", "shard_file", "sidecar_file", "versions"]

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 2  # 2: shard files of layout 2 (see beamtok.cache.schema)
READABLE_FORMATS = (1, 2)
SHARDS_DIR = "shards"
TOKENIZER_FILE = "tokenizer.json"


def shard_file(index: int) -> str:
    return f"{SHARDS_DIR}/shard-{index:05d}.parquet"


def sidecar_file(index: int) -> str:
    return f"{SHARDS_DIR}/shard-{index:05d}.json"


@dataclass
class ShardEntry:
    """One shard of the cache: its source, its Parquet file and what is in it."""

    index: int
    url: str
    source_size: int | None  # of a local input file: a re-run rebuilds the shard if it changed
    file: str
    bytes: int
    sha256: str
    rows: int
    tokens: int
    pad_tokens: int
    documents: dict[str, Any]
    fingerprint: str = ""
    footer_sha256: str = ""  # of the Parquet footer, checked whenever the file is opened

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: str) -> ShardEntry:
        try:
            entry = cls(**data)
        except TypeError as e:
            raise CacheError(f"{where}: malformed shard entry: {e}") from e
        check_relative(entry.file)
        return entry


@dataclass
class Manifest:
    spec: dict[str, Any]
    fingerprint: str
    shards: list[ShardEntry]
    versions: dict[str, str] = field(default_factory=dict)
    tokenizer_file: str | None = None
    created: str = ""
    format: int = MANIFEST_FORMAT
    input_root: str | None = None  # the directory relative local input paths were given in

    def input_path(self, url: str, source_root: str | None = None) -> str:
        """Where to read input ``url`` now: a relative local path is taken from the directory
        the build ran in (``input_root``); ``source_root`` stands for that directory after
        the inputs moved, for relative paths and for absolute paths under it."""
        if is_remote(url) or url.startswith("memory://"):
            return url
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

    @property
    def totals(self) -> dict[str, Any]:
        skipped: dict[str, int] = {}
        for s in self.shards:
            for reason, n in s.documents["skipped"].items():
                skipped[reason] = skipped.get(reason, 0) + n
        docs = {
            "read": sum(s.documents["read"] for s in self.shards),
            "emitted": sum(s.documents["emitted"] for s in self.shards),
            "skipped": dict(sorted(skipped.items())),
            "truncated": sum(s.documents["truncated_docs"] for s in self.shards),
        }
        return {
            "shards": len(self.shards),
            "rows": sum(s.rows for s in self.shards),
            "tokens": sum(s.tokens for s in self.shards),
            "pad_tokens": sum(s.pad_tokens for s in self.shards),
            "bytes": sum(s.bytes for s in self.shards),
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
    def from_json(cls, data: Any, where: str) -> Manifest:
        if not isinstance(data, dict) or "format" not in data:
            raise CacheError(f"{where}: not a beamtok manifest")
        if data["format"] not in READABLE_FORMATS:
            readable = ", ".join(map(str, READABLE_FORMATS))
            raise CacheError(f"{where}: manifest format {data['format']!r} is not supported (this beamtok reads formats {readable}); upgrade beamtok")
        try:
            shards = [ShardEntry.from_json(s, where) for s in data["shards"]]
            manifest = cls(
                data["spec"], data["fingerprint"], shards, data["versions"], data["tokenizer_file"], data["created"],
                input_root=data.get("input_root"),  # absent from manifests of earlier versions
                format=data["format"],
            )
        except KeyError as e:
            raise CacheError(f"{where}: manifest lacks {e}") from e
        if manifest.tokenizer_file is not None:
            check_relative(manifest.tokenizer_file)
        if [s.index for s in shards] != list(range(len(shards))):
            raise CacheError(f"{where}: shard entries are not numbered 0..{len(shards) - 1}")
        return manifest


def read_manifest(storage: Storage) -> Manifest:
    """Read and validate a cache's manifest; a missing one means the cache is unfinished."""
    if not storage.exists(MANIFEST):
        if storage.list(SHARDS_DIR):
            raise CacheError(f"{storage.url}: cache is unfinished (shard files but no {MANIFEST}); re-run `beamtok cache` to complete it")
        raise CacheError(f"{storage.url}: not a beamtok cache (no {MANIFEST})")
    where = storage.display(MANIFEST)
    try:
        data = json.loads(storage.read_bytes(MANIFEST))
    except json.JSONDecodeError as e:
        raise CacheError(f"{where}: not valid JSON: {e}") from e
    return Manifest.from_json(data, where)


def versions() -> dict[str, str]:
    """Versions recorded in a cache's manifest (of installed distributions: nothing is imported)."""
    import sys
    from importlib import metadata

    found = {}
    for key, distribution in (("beamtok", "beamtok"), ("apache_beam", "apache-beam"), ("tokenizers", "tokenizers"), ("pyarrow", "pyarrow"), ("transformers", "transformers")):
        try:
            found[key] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            pass
    found["python"] = sys.version.split()[0]
    return found

"""One shard's entry in a cache's manifest: its source, its Parquet file and what is in it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from beamtok.base.errors import CacheError
from beamtok.cache.format.storage import check_relative

__all__ = ["ShardEntry"]


@dataclass(slots=True)  # a cache may list 100,000 shards: no __dict__ per entry
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

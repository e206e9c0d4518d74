"""One shard's entry in a cache's manifest: its source, its Parquet file and what is in it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from beamtok._src.base.errors import CacheError
from beamtok._src.cache.format.storage import check_relative

__all__ = ["ShardEntry"]


@dataclass(slots=True)  # a cache may list 100,000 shards: no __dict__ per entry
class ShardEntry:
    """One shard of the cache: its source, its Parquet file and what is in it.

    Attributes:
        index: The shard's index (its input file's place in the sorted input list).
        url: The input file the shard was made from.
        source_size: The input file's size when local; a re-run rebuilds the shard if it changed.
        file: The shard's Parquet file, relative to the cache root.
        bytes: The Parquet file's size.
        sha256: The Parquet file's SHA-256.
        rows: Rows in the file (examples, or documents in an unpacked cache).
        tokens: Tokens in those rows, padding included.
        pad_tokens: Padding tokens among them.
        documents: The input documents' counts (read, kept, skipped by reason).
        fingerprint: The spec fingerprint the shard was built with.
        footer_sha256: The SHA-256 of the Parquet footer, checked whenever the file is opened.
    """

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
        """The entry one shard's JSON holds.

        Args:
            data: The parsed JSON of one entry.
            where: Where it was read, for error messages.

        Raises:
            CacheError: A field is missing or unknown, or the file path leaves the cache.
        """
        try:
            entry = cls(**data)
        except TypeError as e:
            raise CacheError(f"{where}: malformed shard entry: {e}") from e
        check_relative(entry.file)
        return entry

"""How a Beam build's workers get the spec's tokenizers without any path of the launching
machine."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from beamtok._src.base.errors import CacheError
from beamtok._src.cache.format.manifest import TOKENIZER_FILE
from beamtok._src.cache.format.storage import Storage
from beamtok._src.transforms.tokenizer_registry import is_registered, register_serialized

__all__ = ["ShippedTokenizers"]


@dataclass(frozen=True)
class ShippedTokenizers:
    """How workers get the spec's tokenizers without any path of the launching machine: the
    last (the cache's own) from ``tokenizer.json`` in the output directory, which the launcher
    writes before the pipeline starts, and any other serialized inside the job. A tokenizer
    of hundreds of thousands of tokens serializes to over 10 MB, more than a Dataflow job
    request may carry, so the main one never travels in the job graph."""

    inline: tuple[dict[str, Any], ...]  # serialized tokenizers other than the cache's own
    from_output: str | None  # fingerprint of the one in the output's tokenizer.json

    @classmethod
    def of(cls, blobs: Sequence[dict[str, Any]]) -> ShippedTokenizers:
        if not blobs:
            return cls((), None)
        return cls(tuple(blobs[:-1]), str(blobs[-1]["fingerprint"]))

    def register(self, storage: Storage) -> None:
        """Make this worker process's resolve_tokenizer return them (rebuilt once per process)."""
        register_serialized(self.inline)
        if self.from_output is None or is_registered(self.from_output):
            return
        blob = json.loads(storage.read_bytes(TOKENIZER_FILE))
        if blob.get("fingerprint") != self.from_output:
            raise CacheError(
                f"{storage.display(TOKENIZER_FILE)} holds tokenizer {blob.get('fingerprint')}, the job was built with "
                f"{self.from_output}: another build replaced it while this one ran"
            )
        register_serialized([blob])

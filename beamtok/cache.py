"""Reading a beamtok cache's files: the manifest, the rows, a check of every file, and the
Megatron indexed datasets ``Dataset.to_megatron`` writes. Streaming a cache into training is
``beamtok.Dataset.from_cache``; this namespace is for looking at one. Needs pyarrow, not Beam.
"""

from beamtok._src.cache.format.manifest import Manifest, ShardEntry, read_manifest
from beamtok._src.cache.format.megatron_index import read_index
from beamtok._src.cache.read.reader import Cache
from beamtok._src.cache.read.verify import VerifyReport, verify_cache

__all__ = [
    "Cache",
    "Manifest",
    "ShardEntry",
    "VerifyReport",
    "read_index",
    "read_manifest",
    "verify_cache",
]

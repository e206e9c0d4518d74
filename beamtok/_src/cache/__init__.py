"""The offline cache: Parquet schema, manifest, shard writer, reader backends, verifier and
build orchestration.

Importing this package needs pyarrow but not Apache Beam; the Beam transform that drives the
writer lives in ``beamtok._src.beam``, imported only when a cache is built.
"""

from beamtok._src.cache.format.manifest import Manifest, ShardEntry, read_manifest
from beamtok._src.cache.read.reader import Cache
from beamtok._src.cache.read.verify import VerifyReport, verify_cache

__all__ = ["Cache", "Manifest", "ShardEntry", "VerifyReport", "read_manifest", "verify_cache"]

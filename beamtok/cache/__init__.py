"""The offline cache: Parquet schema, manifest, shard writer, reader and verifier.

Importing this package needs pyarrow but not Apache Beam; the Beam pipeline that drives the
writer lives in ``pipelines.cache``.
"""

from beamtok.cache.manifest import Manifest, ShardEntry, read_manifest
from beamtok.cache.reader import Cache
from beamtok.cache.verify import VerifyReport, verify_cache

__all__ = ["Cache", "Manifest", "ShardEntry", "VerifyReport", "read_manifest", "verify_cache"]

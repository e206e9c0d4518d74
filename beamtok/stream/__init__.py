"""The stream: checkpointable stages shared by on-the-fly and cached data."""

from beamtok.backends.protocol import ShardBackend, ShardOrigin
from beamtok.stream.iterator import STATE_VERSION, DatasetIterator
from beamtok.stream.reader_split import ReaderSplit
from beamtok.stream.source import ShardSource

__all__ = ["STATE_VERSION", "DatasetIterator", "ReaderSplit", "ShardBackend", "ShardOrigin", "ShardSource"]

"""The stream: checkpointable stages shared by on-the-fly and cached data."""

from beamtok.stream.backend import ShardBackend, ShardOrigin
from beamtok.stream.dataset import Dataset
from beamtok.stream.iterator import STATE_VERSION, DatasetIterator
from beamtok.stream.source import ShardSource
from beamtok.stream.split import ReaderSplit

__all__ = ["STATE_VERSION", "Dataset", "DatasetIterator", "ReaderSplit", "ShardBackend", "ShardOrigin", "ShardSource"]

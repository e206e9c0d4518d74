"""The stream: checkpointable stages shared by on-the-fly and cached data."""

from beamtok.stream.dataset import Dataset
from beamtok.stream.iterator import STATE_VERSION, DatasetIterator
from beamtok.stream.source import ReaderSplit, ShardSource

__all__ = ["STATE_VERSION", "Dataset", "DatasetIterator", "ReaderSplit", "ShardSource"]

"""The fluent ``Dataset`` (per-shard stages, stream stages, caching with Beam) and the
datasets that option tables and data configs describe. The layer above the stream and the
cache: the only place that builds both."""

from beamtok._src.dataset.config import DataConfig, load_config
from beamtok._src.dataset.dataset import Dataset

__all__ = ["DataConfig", "Dataset", "load_config"]

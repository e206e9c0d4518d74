"""The fluent ``Dataset``, one module per transformation bound by name in ``dataset.py``
(sources, records, tokenizing, packing, shard order, rank split, stream stages, caching,
iterating), and the datasets that option tables and data configs describe. The layer above
the stream and the cache: the only place that builds both."""

from beamtok._src.dataset.config import DataConfig, load_config
from beamtok._src.dataset.dataset import Dataset

__all__ = ["DataConfig", "Dataset", "load_config"]

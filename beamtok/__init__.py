"""beamtok: tokenize and pack LLM training data, on the fly or from a Beam-built cache.

Both modes yield the same examples in the same order and share one resumable cursor.
"""

from beamtok.backends.parallel import WorkerError
from beamtok.base.errors import BeamtokError, CacheError, ConfigError, InputError, StateError
from beamtok.core.spec import Spec
from beamtok.dataset import DataConfig, Dataset, load_config
from beamtok.shards.items import DocCounts, Produced, ShardCursor
from beamtok.shards.processor import ShardProcessor
from beamtok.sources.urls import Shard, expand_urls
from beamtok.stream.iterator import STATE_VERSION, DatasetIterator
from beamtok.stream.ranks.elastic import reader_states
from beamtok.transforms.bos_eos import ensure_bos_eos
from beamtok.transforms.tokenize import Tokenizer, load_tokenizer

__version__ = "0.1.0"

__all__ = [
    "STATE_VERSION",
    "BeamtokError",
    "CacheError",
    "ConfigError",
    "DataConfig",
    "Dataset",
    "DatasetIterator",
    "DocCounts",
    "InputError",
    "Produced",
    "Shard",
    "ShardCursor",
    "ShardProcessor",
    "Spec",
    "StateError",
    "Tokenizer",
    "WorkerError",
    "__version__",
    "ensure_bos_eos",
    "expand_urls",
    "load_config",
    "load_tokenizer",
    "reader_states",
]

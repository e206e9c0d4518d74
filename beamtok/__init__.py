"""beamtok: tokenize and pack LLM training data, on the fly or from a Beam-built cache.

Both modes yield the same examples in the same order and share one resumable cursor.

The public surface is this module and its namespaces, by what a user does:

- ``beamtok.training``: loaders, checkpoint helpers and trainer integrations (PyTorch,
  the Hugging Face Trainer, Lightning, torchtitan, JAX/Orbax, grain);
- ``beamtok.cache``: reading and verifying a cache's files;
- ``beamtok.beam``: the Beam transforms, for a build inside a pipeline of your own;
- ``beamtok.extend``: what a new stream stage or tokenizer engine is written against;
- ``beamtok.testing``: checks of your own pipeline (resumption, equivalence) and tiny
  tokenizers for tests.

Everything under ``beamtok._src`` is private.
"""

from beamtok._src.base.errors import BeamtokError, CacheError, ConfigError, InputError, StateError
from beamtok._src.dataset import DataConfig, Dataset, load_config
from beamtok._src.production.parallel import WorkerError
from beamtok._src.stream.iterator import DatasetIterator
from beamtok._src.stream.ranks.elastic import reader_states
from beamtok._src.transforms.tokenize import Tokenizer
from beamtok._src.transforms.tokenizer_registry import load_tokenizer

__version__ = "0.1.0"

__all__ = [
    "BeamtokError",
    "CacheError",
    "ConfigError",
    "DataConfig",
    "Dataset",
    "DatasetIterator",
    "InputError",
    "StateError",
    "Tokenizer",
    "WorkerError",
    "__version__",
    "load_config",
    "load_tokenizer",
    "reader_states",
]

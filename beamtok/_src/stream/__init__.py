"""The stream: checkpointable stages shared by on-the-fly and cached data.

- ``reading/``: the root source that reads shards in order (``ShardSource``);
- ``roots/``: what a stream starts from, as data (shards, a mix, a global shuffle);
- ``mixing/``: weighted mixes, their one rule, reading and seeking;
- ``global_order/``: a global shuffle of a cache, computed, never stored;
- ``ranks/``: how readers share a stream, and resuming on another world size;
- ``stages/``: the stages after the root (batch, batch_tokens, shuffle, take, enumerate);
- here: the pipeline and its plan, the iterator and its state (and the migration of old
  states), the table of kinds, explaining a state, timing, the torch adapter.
"""

from beamtok._src.production.protocol import ShardBackend, ShardOrigin
from beamtok._src.stream.iterator import STATE_VERSION, DatasetIterator
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.reading.source import ShardSource

__all__ = ["STATE_VERSION", "DatasetIterator", "ReaderSplit", "ShardBackend", "ShardOrigin", "ShardSource"]

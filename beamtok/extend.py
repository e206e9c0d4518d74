"""What new parts of beamtok are written against.

**A stream stage** is a frozen :class:`Stage` (its options, checked when made; ``to_json``
feeds the stream fingerprint) whose ``build`` makes a live :class:`StageNode` over the node
upstream: an iterator with ``state_dict()`` and ``reset(state)`` holding its own small
position beside the upstream's, never examples. ``Dataset.apply(stage)`` adds it;
``beamtok.testing.check_resumption`` checks that it resumes exactly.

**The per-shard processing** both modes run, for a runner of your own: a :class:`Spec` (what
is done to each shard), :class:`Shard` (which file or byte range), :class:`ShardProcessor`
(the documents of one shard from a :class:`ShardCursor`, yielding :class:`Produced` items
and :class:`DocCounts`), :func:`expand_urls` (brace and glob patterns to files).

**A tokenizer engine** answers the :class:`Engine` protocol; :func:`choose` takes a file's
candidates (:func:`candidates_for`) in order and records each refusal (:class:`Refusal`) in
an :class:`EngineChoice`.
"""

from beamtok._src.core.spec import Spec
from beamtok._src.engines import Candidate, Engine, EngineChoice, Refusal, candidates_for, choose
from beamtok._src.shards.items import DocCounts, Produced, ShardCursor
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.sources.urls import Shard, expand_urls
from beamtok._src.stream.iterator import STATE_VERSION
from beamtok._src.stream.node import Node, Stage, StageNode, StreamContext
from beamtok._src.transforms.bos_eos import ensure_bos_eos

__all__ = [
    "STATE_VERSION",
    "Candidate",
    "DocCounts",
    "Engine",
    "EngineChoice",
    "Node",
    "Produced",
    "Refusal",
    "Shard",
    "ShardCursor",
    "ShardProcessor",
    "Spec",
    "Stage",
    "StageNode",
    "StreamContext",
    "candidates_for",
    "choose",
    "ensure_bos_eos",
    "expand_urls",
]

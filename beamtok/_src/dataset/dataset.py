"""The fluent Dataset: per-shard stages first, stream stages after, then ``iter()``.

    ds = (Dataset.from_files("data/corpus/shakespeare-{00..03}.jsonl")
          .tokenize("data/tokenizers/gpt2")
          .ensure_bos_eos()
          .concat_chunk(1024)
          .shuffle(window=64, seed=0)
          .batch(8))
    it = ds.iter()
    batch = next(it)
    state = it.state_dict()            # JSON; resume with ds.iter(state)

A Dataset is immutable: every method returns a new one. It holds a
:class:`~beamtok._src.stream.pipeline.Pipeline`: a root plan (files, a cache, a mix, a global
shuffle: ``beamtok._src.stream.roots``), how readers split it, and its stream stages, which run
after the shard processing in both modes.

Each method is written, with its docstring, in the module of its transformation (sources,
tokenizing, packing, shard order, rank split, stream stages, caching, iterating), as a function
of the dataset it extends; the class binds them by name, so this module reads as the list of
what a Dataset does. Each adds one stage, option or root through ``stage_adding``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from beamtok._src.core.spec import Spec
from beamtok._src.dataset import (
    caching,
    file_sources,
    hf_datasets,
    iterating,
    memory_sources,
    mixing,
    packing,
    rank_split,
    records,
    shard_order,
    stream_stages,
    tokenizing,
)
from beamtok._src.dataset.constructor import constructor
from beamtok._src.sources.urls import Shard
from beamtok._src.stream.pipeline import Pipeline

__all__ = ["Dataset"]


class Dataset:
    """A checkpointable stream of examples, built step by step.

    Args:
        pipeline: The stream as data (made by the ``from_*`` constructors and the methods).
    """

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    # sources
    from_files = constructor(file_sources.from_files)
    cut_files = file_sources.cut_files
    from_mds = constructor(file_sources.from_mds)
    from_sequence = constructor(memory_sources.from_sequence)
    from_iterable = constructor(memory_sources.from_iterable)
    from_hf = constructor(hf_datasets.from_hf)
    from_cache = constructor(caching.from_cache)
    mix = constructor(mixing.mix)

    # per-shard stages: on documents, tokenizing, packing
    map = records.map
    filter = records.filter
    filter_length = records.filter_length
    tokenize = tokenizing.tokenize
    tokenize_sft = tokenizing.tokenize_sft
    tokenize_chat = tokenizing.tokenize_chat
    ensure_bos_eos = tokenizing.ensure_bos_eos
    concat_chunk = packing.concat_chunk
    pad = packing.pad
    pack_examples = packing.pack_examples
    pack_documents = packing.pack_documents
    pack_power_of_two = packing.pack_power_of_two
    sliding_window = packing.sliding_window

    # how shards are read, and by which rank
    shuffle_shards = shard_order.shuffle_shards
    interleave = shard_order.interleave
    repeat = shard_order.repeat
    parallel = shard_order.parallel
    global_shuffle = shard_order.global_shuffle
    shard_by_rank = rank_split.shard_by_rank
    balance_ranks = rank_split.balance_ranks

    # stream stages
    shuffle = stream_stages.shuffle
    batch = stream_stages.batch
    batch_tokens = stream_stages.batch_tokens
    take = stream_stages.take
    enumerate = stream_stages.enumerate
    apply = stream_stages.apply

    # caches
    cache = caching.cache
    cache_as_you_go = caching.cache_as_you_go
    to_megatron = caching.to_megatron

    # iterators
    iter = iterating.iter
    iter_merged = iterating.iter_merged
    iter_at = iterating.iter_at
    to_torch = iterating.to_torch

    def __iter__(self) -> Iterator[Any]:
        return self.iter()

    @property
    def pipeline(self) -> Pipeline:
        """The stream as data: its root plan, reader split and stages."""
        return self._pipeline

    @property
    def spec(self) -> Spec:
        """The shard processing as a Spec (what the Beam pipeline runs, and what keys caches)."""
        return self._pipeline.root.spec

    @property
    def sources(self) -> tuple[Dataset, ...]:
        """The datasets a mix mixes (a plain dataset: itself)."""
        roots = self._pipeline.root.sources
        if roots == (self._pipeline.root,):
            return (self,)
        return tuple(Dataset(Pipeline(root)) for root in roots)

    @property
    def spec_fingerprint(self) -> str:
        """The fingerprint of the shard processing (what keys a cache)."""
        return self._pipeline.spec_fingerprint

    @property
    def is_cached(self) -> bool:
        """Whether the dataset reads a cache."""
        return self._pipeline.root.cached

    def stream_fingerprint_for(self, world_size: int) -> str:
        """The stream fingerprint this dataset has when split over ``world_size`` ranks.

        Args:
            world_size: A world size.
        Returns:
            The stream fingerprint (a hex string).
        """
        return self._pipeline.stream_fingerprint_for(world_size)

    @property
    def stream_fingerprint(self) -> str:
        """The fingerprint of the whole stream (what a state must match to resume it)."""
        return self._pipeline.stream_fingerprint

    @property
    def shards(self) -> tuple[Shard, ...]:
        """The shards of a dataset with one shard processing (files, ranges or in-memory parts)."""
        return self._pipeline.root.shards

    def __repr__(self) -> str:
        p = self._pipeline
        return f"Dataset({p.root.describe()}, stages={[s.NAME for s in p.stages]})"

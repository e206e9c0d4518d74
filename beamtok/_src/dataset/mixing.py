"""A dataset mixing others by weight (``Dataset.mix``): each source's root, flattened where that
is exact, under one mix plan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.dataset.stage_adding import D
from beamtok._src.stream.mixing.mix_plan import MixPlan
from beamtok._src.stream.mixing.nesting import flattened_mixes
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.roots.global_shuffle import GlobalShuffleRoot
from beamtok._src.stream.roots.mix import MixRoot
from beamtok._src.stream.roots.shards import shard_root

__all__ = ["mix"]


def mix(
    cls: type[D],
    datasets: Sequence[D],
    weights: Sequence[float] | Sequence[tuple[int, Sequence[float]]] | None = None,
    *,
    seed: int = 0,
    stop: str = "never",
    block_size: int | None = None,
    max_epochs: int | Sequence[int | None] | None = None,
    flatten: bool | None = None,
) -> D:
    """Mix the examples of several datasets (each on the fly or from a cache) by weight.

    The source of each example is a function of (seed, example index, weights): every
    block of ``block_size`` examples (default 4096, or more for weights too small for it)
    holds each source's exact share, by largest remainder, in a seeded order. Weights are
    normalised (a source's share is its weight over their sum; the smallest share is
    1/1,048,576, the largest block). ``weights`` may be a schedule ``[(start_example, weights), ...]`` whose stages start at block
    boundaries. ``stop``: ``"never"`` (an exhausted source restarts, its next epoch
    reshuffled), ``"first_exhausted"`` or ``"all_exhausted"``. ``max_epochs`` caps how many
    times a source is read (one cap for all, or one per source, None for none): a spent
    source's positions are passed over and the mix ends when every source with weight is
    spent. ``it.set_weights(...)`` changes the weights while training. A source may be
    another mix: nested, it keeps its own rule and each position drawn for it takes its
    next example (a mix that ends is read once: ``max_epochs=1`` for it, or
    ``stop="first_exhausted"``); ``flatten`` (None: where exact) makes a mix of constant
    weights that never stops one mix of its sources instead, each weighted by its share of
    it times its weight (``source`` then numbers these leaves in order). A source
    may be a cache's ``global_shuffle()``: its rows come in that order. Give each
    source its own per-shard stages and shard options (``shuffle_shards``, ``interleave``,
    ``parallel``); add stream stages (``shuffle``, ``batch``, ``shard_by_rank``...) to the mix.

    Args:
        datasets: The sources, each a Dataset without stream stages.
        weights: One weight a source (None: equal), or a schedule ``[(start_example, weights), ...]``.
        seed: The seed of the order within each block.
        stop: ``"never"``, ``"first_exhausted"`` or ``"all_exhausted"``.
        block_size: Examples a block holding each source's exact share (None: 4096, or more as the weights
            need).
        max_epochs: How many times a source is read: one cap for all, one a source, or None for none.
        flatten: Make a mix of mixes one mix of their sources (None: where that is exact).
    Returns:
        A Dataset of the mixed examples, each with its ``source`` number.
    """
    sources = tuple(datasets)
    if not sources or not all(isinstance(d, cls) for d in sources):
        raise ConfigError("mix() takes a non-empty list of Datasets")
    roots: list[Any] = []
    for i, d in enumerate(sources):
        p = d.pipeline
        if p.stages:
            raise ConfigError(
                f"mix source {i} has stream stages {[s.NAME for s in p.stages]}; add them to the mix instead"
            )
        if p.reader != ReaderSplit() or p.even is not None:
            raise ConfigError(f"mix source {i} is split by rank; call shard_by_rank() on the mix instead")
        roots.append(
            p.root if isinstance(p.root, (MixRoot, GlobalShuffleRoot)) else shard_root(p.root, f"mix source {i}")
        )
    if flatten is not False:
        roots, weights, max_epochs = flattened_mixes(roots, weights, max_epochs, required=flatten is True)
    plan = MixPlan.make(len(roots), weights, seed=seed, stop=stop, block_size=block_size, max_epochs=max_epochs)
    return cls(Pipeline(MixRoot(tuple(roots), plan)))

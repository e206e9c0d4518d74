"""How a Dataset method makes the next Dataset: a step or a packing added to the shard root's
spec, a stream stage added after the others, or another root. The refusals every such method
shares (a per-shard stage after a stream stage, a second packing, tokens needed before
tokenizing) are said here once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.sizes import ROW_BYTES_PER_TOKEN, check_memory
from beamtok._src.core.spec import PackSpec, Spec
from beamtok._src.core.steps import Step
from beamtok._src.sources.urls import Shard
from beamtok._src.stream.node import Stage
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.roots.shards import ShardsRoot, shard_root
from beamtok._src.transforms.packing_modes import PackingMode
from beamtok._src.transforms.tokenize import TokenizerRef

__all__ = [
    "D",
    "Extensible",
    "of_shards",
    "replaced",
    "root_for_steps",
    "tokenizer_ref",
    "uncached_shard_root",
    "with_pack",
    "with_root_options",
    "with_stage",
    "with_step",
]


class Extensible(Protocol):
    """What a transformation needs of the dataset it extends: its pipeline, and its class, to
    make the next one. ``Dataset`` is the one such class; the transformation modules are written
    against this, so none of them imports the class that binds them."""

    @property
    def pipeline(self) -> Pipeline:
        """The stream as data."""
        ...

    def __init__(self, pipeline: Pipeline) -> None: ...


D = TypeVar("D", bound=Extensible)
"""The dataset a transformation extends, and so the class of the one it returns."""


def of_shards(cls: type[D], shards: Sequence[Shard], spec: Spec) -> D:
    """A dataset reading ``shards`` on the fly with ``spec``."""
    return cls(Pipeline(ShardsRoot(tuple(shards), spec)))


def replaced(dataset: D, **changes: Any) -> D:
    """``dataset`` with these fields of its pipeline changed (``root``, ``reader``, ...)."""
    return type(dataset)(dataclasses.replace(dataset.pipeline, **changes))


def with_root_options(dataset: D, **changes: Any) -> D:
    """``dataset`` with these options of its root changed (shard order, epochs, workers...)."""
    return replaced(dataset, root=dataset.pipeline.root.with_options(**changes))


def root_for_steps(dataset: D, name: str) -> ShardsRoot:
    """The shard root a per-shard stage ``name`` changes, refusing it after stream stages."""
    root = shard_root(dataset.pipeline.root, f"{name}()")
    if dataset.pipeline.stages:
        raise ConfigError(f"{name}() is a per-shard stage; call it before shuffle/batch/take/enumerate")
    return root


def tokenizer_ref(dataset: D, name: str) -> TokenizerRef:
    """The tokenizer of ``dataset``'s shard processing, which stage ``name`` needs."""
    ref = root_for_steps(dataset, name).spec.tokenizer
    if ref is None:
        raise ConfigError(f"{name}() needs tokens: call tokenize() before it")
    return ref


def with_step(dataset: D, step: Step) -> D:
    """``dataset`` with ``step`` run on each document after its other steps."""
    name = step.OP
    root = root_for_steps(dataset, name)
    root.origin.check_step(name)
    if root.spec.pack is not None:
        raise ConfigError(f"{name}() works on documents; call it before the packing stage")
    if step.TOKENIZES and root.spec.tokenized:
        done = next(s.OP for s in root.spec.steps if s.TOKENIZES)
        raise ConfigError(f"{name}(): the documents are already tokenized by {done}(); tokenize once")
    spec = dataclasses.replace(root.spec, steps=(*root.spec.steps, step))
    return replaced(dataset, root=root.with_spec(spec))


def with_pack(dataset: D, mode: type[PackingMode], seq_len: int, **options: Any) -> D:
    """``dataset`` packed into rows by ``mode`` (a dataset has one packing)."""
    name = mode.API
    root = root_for_steps(dataset, name)
    root.origin.check_pack(name)
    if root.spec.pack is not None:
        raise ConfigError(f"{name}(): the dataset is already packed ({root.spec.pack.mode})")
    pad_id = tokenizer_ref(dataset, name).pad_id
    pack = PackSpec(mode.NAME, seq_len, pad_id, **options)  # type: ignore[arg-type]
    return replaced(dataset, root=root.with_spec(dataclasses.replace(root.spec, pack=pack)))


def with_stage(dataset: D, stage: Stage) -> D:
    """``dataset`` with the stream stage ``stage`` after its others, refused where the rows the
    stages hold at once would not fit in memory."""
    stages = (*dataset.pipeline.stages, stage)
    width = dataset.pipeline.root.row_tokens
    held = sum(s.rows_held() for s in stages)
    if width is not None and held:  # what the stages hold at once, with a copy for collating
        check_memory(
            f"{stage.NAME}() ({held:,} rows of {width:,} tokens held at once)",
            2 * held * width * ROW_BYTES_PER_TOKEN,
        )
    return replaced(dataset, stages=stages)


def uncached_shard_root(dataset: D, name: str, does: str) -> ShardsRoot:
    """The root of a dataset read on the fly with no stream stage, which ``name`` (that
    ``does`` what it says) takes; ConfigError for a cache, a mix or stream stages."""
    if dataset.pipeline.root.cached:
        raise ConfigError("this dataset already reads a cache")
    root = shard_root(dataset.pipeline.root, name)
    if dataset.pipeline.stages:
        raise ConfigError(f"{name} {does}: call it before shuffle/batch/take/enumerate")
    return root

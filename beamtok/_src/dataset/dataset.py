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
after the shard processing in both modes. The facade asks its root for what it needs and
never branches on the root's kind; each constructor makes one kind of root.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.extras import require
from beamtok._src.core.spec import SourceSpec, Spec
from beamtok._src.dataset.caching import Caching
from beamtok._src.dataset.file_ranges import cut_as_saved
from beamtok._src.dataset.iterating import iterator_at, merged_iterator, saved_iterator
from beamtok._src.dataset.old_calls import old_iter_call
from beamtok._src.dataset.per_shard_stages import PerShardStages
from beamtok._src.dataset.source_options import SourceOptions
from beamtok._src.dataset.stream_stages import StreamStages
from beamtok._src.sources.byte_ranges import AUTO
from beamtok._src.sources.memory import hf_iterable_shards, iterable_shard, sequence_shards
from beamtok._src.sources.urls import Shard, expand_urls
from beamtok._src.stream.iterator import DatasetIterator
from beamtok._src.stream.mixing.mix_plan import MixPlan
from beamtok._src.stream.mixing.nesting import flattened_mixes
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.roots.base import RootPlan
from beamtok._src.stream.roots.global_shuffle import GlobalShuffleRoot
from beamtok._src.stream.roots.mix import MixRoot
from beamtok._src.stream.roots.shards import ShardsRoot, shard_root

__all__ = ["Dataset"]


class Dataset(SourceOptions, PerShardStages, StreamStages, Caching):
    """A checkpointable stream of examples, built step by step."""

    @classmethod
    def _of_shards(cls, shards: Sequence[Shard], spec: Spec) -> Dataset:
        return cls(Pipeline(ShardsRoot(tuple(shards), spec)))

    # ----------------------------------------------------------------- sources

    @classmethod
    def from_files(
        cls,
        urls: str | Sequence[str],
        *,
        format: str = "auto",
        text_field: str = "text",
        columns: Sequence[str] | None = None,
        on_error: str = "raise",
        split_bytes: int | str | None = None,
    ) -> Dataset:
        """Read files: JSONL (optionally .gz/.zst), Parquet or plain text, local or remote.

        ``urls`` may use brace patterns (``train.{00..31}.jsonl.gz``) and local globs; each
        file is one shard, numbered in the expanded order.

        ``split_bytes`` cuts each large file into ranges that are shards of their own (so
        more readers than files can share them): a size (``"64MB"``) cuts where the Beam build
        cuts for the same ``--split-bytes`` (uncompressed JSONL at line starts, Parquet at row
        groups; other files stay whole), ``"auto"`` into 64 ranges a file or ranges of 16 MiB
        when that makes more. A range is packed on its own: a row never spans two ranges, as
        it never spans two files. Without it, ``shard_by_rank`` cuts ``"auto"`` by itself
        when the files are fewer than the readers (docs/distributed.md).

        Args:
            urls: A URL or path, or a list of them: local, ``s3://``, ``gs://``, ``https://``, with brace
                patterns and globs.
            format: ``"auto"`` (from each file's name) or ``"jsonl"``, ``"parquet"``, ``"text"``.
            text_field: The record field holding the text (JSONL and Parquet).
            columns: The Parquet columns to read (None: all).
            on_error: ``"raise"`` (a bad record stops the stream, naming its file and line or row) or
                ``"skip"`` (skipped and counted).
            split_bytes: Cut large files into ranges of about this size (``"64MB"``, bytes, or ``"auto"``);
                None: whole files.
        Returns:
            A Dataset with one shard a file (or a range).
        Raises:
            ConfigError: A pattern matches no file, or an option is not one beamtok knows.
        """
        source = SourceSpec(format, text_field, tuple(columns) if columns is not None else None)
        spec = Spec(source, on_error=on_error)  # type: ignore[arg-type]
        dataset = cls._of_shards([Shard(i, url) for i, url in enumerate(expand_urls(urls))], spec)
        return dataset if split_bytes is None else dataset.cut_files(split_bytes)

    def cut_files(self, split_bytes: int | str) -> Dataset:
        """This dataset with its input files cut into ranges (see :meth:`from_files`'
        ``split_bytes``); only a dataset of files read on the fly, not cut yet.

        Args:
            split_bytes: The range size (``"64MB"`` or bytes), or ``"auto"``.
        Returns:
            A new Dataset.
        """
        from beamtok._src.cache.build.ranges import parse_size

        if split_bytes != AUTO:
            split_bytes = parse_size(split_bytes, "split_bytes")
        return self._replace(root=shard_root(self._pipeline.root, "cut_files()").cut(split_bytes))

    @classmethod
    def from_sequence(
        cls,
        data: Sequence[Any] | Sequence[Sequence[Any]],
        *,
        text_field: str = "text",
        shards: int = 1,
        on_error: str = "raise",
    ) -> Dataset:
        """Read an in-memory sequence of strings or dicts (a list, a ``datasets.Dataset``...).

        ``shards`` > 1 splits it into that many contiguous shards.

        Args:
            data: Strings or dicts, in order.
            text_field: The field holding the text in dicts.
            shards: Contiguous shards to cut it into.
            on_error: ``"raise"`` (a bad record stops the stream, naming its file and line or row) or
                ``"skip"`` (skipped and counted).
        Returns:
            A new Dataset.
        """
        spec = Spec(SourceSpec("memory", text_field), on_error=on_error)  # type: ignore[arg-type]
        return cls._of_shards(sequence_shards(data, shards), spec)

    @classmethod
    def from_iterable(
        cls, source: Iterable[Any] | Callable[[], Iterable[Any]], *, text_field: str = "text", on_error: str = "raise"
    ) -> Dataset:
        """Read a re-iterable object, or a function returning a fresh iterable, as one shard.

        Resuming skips the items before the cursor, so a one-shot iterator (a generator) is
        refused: pass a function that creates it instead.

        Args:
            source: A re-iterable object, or a function returning a fresh iterable each call.
            text_field: The field holding the text in dicts.
            on_error: ``"raise"`` (a bad record stops the stream, naming its file and line or row) or
                ``"skip"`` (skipped and counted).
        Returns:
            A new Dataset.
        Raises:
            ConfigError: ``source`` is a one-shot iterator.
        """
        shard = iterable_shard(source)
        spec = Spec(SourceSpec("memory", text_field), on_error=on_error)  # type: ignore[arg-type]
        return cls._of_shards([shard], spec)

    @classmethod
    def from_cache(cls, directory: str, *, fingerprint: str | None = None) -> Dataset:
        """Reopen a cache built by ``beamtok cache`` or :meth:`cache` as a dataset.

        It yields the examples the on-the-fly pipeline of the same spec yields, with the same
        cursors, so states cross between the two. Pass ``fingerprint`` to insist on a spec.
        A cache built without packing can be packed here with ``.concat_chunk(n)`` etc.

        Args:
            directory: The cache directory (local or an object store URL).
            fingerprint: The spec fingerprint the cache must have; None takes whatever it holds.
        Returns:
            A new Dataset.
        Raises:
            CacheError: The directory holds no complete cache, or one of another fingerprint.
        """
        from beamtok._src.cache.read.backend import CacheOrigin  # pyarrow is imported only for caches

        origin = CacheOrigin.open(directory, fingerprint=fingerprint)
        return cls(Pipeline(ShardsRoot(tuple(origin.shards), origin.spec, origin)))

    @classmethod
    def mix(
        cls,
        datasets: Sequence[Dataset],
        weights: Sequence[float] | Sequence[tuple[int, Sequence[float]]] | None = None,
        *,
        seed: int = 0,
        stop: str = "never",
        block_size: int | None = None,
        max_epochs: int | Sequence[int | None] | None = None,
        flatten: bool | None = None,
    ) -> Dataset:
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
        if not sources or not all(isinstance(d, Dataset) for d in sources):
            raise ConfigError("mix() takes a non-empty list of Datasets")
        roots: list[Any] = []
        for i, d in enumerate(sources):
            p = d._pipeline
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

    @classmethod
    def from_hf(
        cls,
        dataset: Any,
        *,
        text_field: str = "text",
        shards: int = 1,
        on_error: str = "raise",
        split: str = "train",
        config: str | None = None,
    ) -> Dataset:
        """Read a Hugging Face dataset.

        A loaded ``datasets.Dataset`` (map-style) is read in ``shards`` column slices. A
        ``datasets.IterableDataset`` (streamed) is read in its own shards; its cursor is the
        row number in a shard, so a resume re-reads (never re-tokenizes) that shard's rows
        before the cursor. A
        string names the dataset's files instead, one shard per file, read as beamtok reads
        any file (and cacheable by ``beamtok cache --hf-dataset``): a directory written by
        ``save_to_disk`` (a ``DatasetDict``'s: pick ``split``), a directory of data files, or a
        hub name when the hub is reachable (``config`` selects its configuration).

        Args:
            dataset: A loaded ``datasets.Dataset`` or ``IterableDataset``, or a name or directory of its
                files.
            text_field: The column holding the text.
            shards: Column slices a map-style dataset is read in.
            on_error: ``"raise"`` (a bad record stops the stream, naming its file and line or row) or
                ``"skip"`` (skipped and counted).
            split: The split of a ``DatasetDict`` directory or hub dataset.
            config: The hub dataset's configuration.
        Returns:
            A new Dataset.
        """
        if isinstance(dataset, (str, os.PathLike)):
            from beamtok._src.sources.hf_files import hf_dataset_files

            found = hf_dataset_files(os.fspath(dataset), split=split, config=config)
            return cls.from_files(found.urls, format=found.format, text_field=text_field, on_error=on_error)
        kind = type(dataset).__name__
        if kind in ("DatasetDict", "IterableDatasetDict"):
            raise ConfigError(
                f"from_hf(): a {kind} holds several splits ({sorted(dataset)}); pass one, e.g. dataset['train']"
            )
        if kind == "IterableDataset":
            if shards != 1:
                raise ConfigError(
                    f"from_hf(): an IterableDataset is read in its own {dataset.num_shards} shards; drop shards="
                )
            spec = Spec(SourceSpec("memory", text_field), on_error=on_error)  # type: ignore[arg-type]
            return cls._of_shards(hf_iterable_shards(dataset), spec)
        return cls.from_sequence(dataset, text_field=text_field, shards=shards, on_error=on_error)

    @classmethod
    def from_mds(
        cls,
        url: str | os.PathLike[str],
        *,
        split: str | None = None,
        text_field: str = "text",
        columns: Sequence[str] | None = None,
        on_error: str = "raise",
    ) -> Dataset:
        """Read a MosaicML Streaming dataset (MDS shards written by ``streaming.MDSWriter``).

        ``url`` is the dataset's directory (local, ``s3://``, ``gs://``, ``https://``) or its
        ``index.json``; ``split`` is a subdirectory, as Streaming's ``split=``. Each shard file
        is one beamtok shard read in the index's order, its cursor the sample index inside it,
        so a resume seeks straight to the sample. The streaming package is not needed. Text,
        bytes, number and JSON columns are read; pickled columns are refused.

        Args:
            url: The dataset directory (or its ``index.json``), local or remote.
            split: A subdirectory, as Streaming's ``split=``.
            text_field: The column holding the text.
            columns: The columns to read (None: all).
            on_error: ``"raise"`` (a bad record stops the stream, naming its file and line or row) or
                ``"skip"`` (skipped and counted).
        Returns:
            A new Dataset.
        """
        from beamtok._src.sources.mds import mds_shard_urls

        urls = mds_shard_urls(os.fspath(url), split=split)
        return cls.from_files(urls, format="mds", text_field=text_field, columns=columns, on_error=on_error)

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
        return self._pipeline.spec_fingerprint

    @property
    def is_cached(self) -> bool:
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
        return self._pipeline.stream_fingerprint

    @property
    def shards(self) -> tuple[Shard, ...]:
        return self._pipeline.root.shards

    def iter(
        self,
        state: dict[str, Any] | None = None,
        *,
        state_dict: Any = None,
        start_example: int | None = None,
        step: int | None = None,
    ) -> DatasetIterator:
        """A fresh iterator, or one resumed from this reader's ``state`` (never mutated).
        Nothing is read and no worker starts before ``next()``; use the iterator as a context
        manager (or call ``close()``) to stop workers early.

        Args:
            state: A state from ``state_dict()`` of a reader of this split, or None.
            state_dict: Deprecated name of ``state`` (a list of states: use :meth:`iter_merged`).
            start_example: Deprecated: use ``iter_at(example=...)``.
            step: Deprecated: use ``iter_at(step)``.
        Returns:
            A DatasetIterator.
        Raises:
            StateError: The state belongs to another pipeline (the message names what changed) or is
                malformed.
        """
        if state_dict is not None or start_example is not None or step is not None or isinstance(state, list):
            return old_iter_call(self._pipeline, state, state_dict, start_example, step)
        return saved_iterator(self._pipeline, state)

    def iter_merged(self, states: list[dict[str, Any]]) -> DatasetIterator:
        """This reader's iterator resumed from every reader's state of a run on another world
        size or number of DataLoader workers (``beamtok.reader_states`` gathers them from
        checkpoints; docs/checkpoints.md says which changes a resume takes).

        Args:
            states: Every old reader's state.
        Returns:
            A DatasetIterator.
        Raises:
            StateError: The states belong to another pipeline, or a stage cannot be resumed on
                another world size.
        """
        return merged_iterator(self._pipeline, states)

    def iter_at(self, step: int | None = None, *, example: int | None = None) -> DatasetIterator:
        """An iterator whose first item is this reader's step ``step`` (what ``skip(step)`` on a
        fresh iterator reaches, without reading the steps before where ``it.seeks``), or, on a
        packed cache, one starting at global example ``example`` of the source.

        Args:
            step: This reader's step.
            example: A global example of the source (packed caches: it needs the manifest's row
                counts).
        Returns:
            A DatasetIterator.
        Raises:
            ConfigError: Both or neither given, or the step is past this reader's last.
        """
        return iterator_at(self._pipeline, step, example)

    def __iter__(self) -> Iterator[Any]:
        return self.iter()

    def to_torch(self, *, resume_from: list[dict[str, Any]] | None = None) -> Any:
        """A ``torch.utils.data.IterableDataset`` with ``state_dict()``/``load_state_dict()``,
        for torchdata's ``StatefulDataLoader`` (any number of workers).

        ``resume_from``: every reader state of a run with another world size or number of
        DataLoader workers (``beamtok.reader_states(*loader_state_dicts)`` gathers them from
        each old rank's ``loader.state_dict()``); each new worker of each new rank resumes
        its share of what they left.

        Args:
            resume_from: Every reader state of a run with another world size or number of DataLoader workers.
        Returns:
            A ``torch.utils.data.IterableDataset`` with ``state_dict()`` and ``load_state_dict()``.
        """
        require("to_torch()", "torch", "torchdata")
        from beamtok._src.stream.torch_dataset import TorchIterableDataset

        adapter = TorchIterableDataset(
            self if resume_from is None else self._replace(root=cut_as_saved(self._pipeline.root, resume_from))
        )
        if resume_from is not None:
            adapter.load_state_dict(resume_from)
        return adapter

    # -------------------------------------------------------------- helpers

    def _replace(self, **changes: Any) -> Dataset:
        return type(self)(dataclasses.replace(self._pipeline, **changes))

    def _with_root_options(self, **changes: Any) -> Dataset:
        root: RootPlan = self._pipeline.root.with_options(**changes)
        return self._replace(root=root)

    def __repr__(self) -> str:
        p = self._pipeline
        return f"Dataset({p.root.describe()}, stages={[s.NAME for s in p.stages]})"

"""Caches and a Dataset: reopening a cache, a Beam build into one (``cache``), Megatron's
indexed files (``to_megatron``), and a cache written as the stream reads (``cache_as_you_go``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.extras import require
from beamtok._src.beam.worker_server import start_early
from beamtok._src.core.cache_options import BUILD_DEFAULTS, beam_args
from beamtok._src.core.spec import tokenizers_to_warm
from beamtok._src.dataset.stage_adding import D, replaced, uncached_shard_root
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.roots.shards import ShardsRoot, shard_root

__all__ = ["cache", "cache_as_you_go", "from_cache", "to_megatron"]


def from_cache(cls: type[D], directory: str, *, fingerprint: str | None = None) -> D:
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


def cache(
    self: D,
    output_dir: str,
    *,
    overwrite: bool = BUILD_DEFAULTS["overwrite"],
    progress: bool = True,
    row_group_rows: int | None = None,
    row_group_bytes: int | None = None,
    parquet_compat: bool = BUILD_DEFAULTS["parquet_compat"],
    split_bytes: int | str | None = BUILD_DEFAULTS["split_bytes"],
    **beam_options: Any,
) -> D:
    """Run the Beam pipeline over this dataset's shard processing, writing a Parquet cache to
    ``output_dir``; return the cached dataset with this dataset's stream stages.

    ``beam_options`` pass through as pipeline options (``runner="DataflowRunner"``,
    ``direct_running_mode="multi_processing"``, ``direct_num_workers=2``, ...). Re-running
    completes an unfinished cache; a cache of another spec or of other input files is
    refused unless ``overwrite``, which removes every file of the old cache.
    Parquet row groups hold ``row_group_rows`` rows or about ``row_group_bytes`` of tokens
    (default 8 MB): small groups make random access cheaper, large ones read faster.
    ``parquet_compat`` writes files every Parquet reader opens (snappy instead of zstd).
    Input files larger than ``split_bytes`` (uncompressed JSONL by byte ranges, Parquet by
    row groups; None: never) are tokenized in ranges by several workers and packed in
    order: the cache is byte for byte the one an unsplit build writes.
    ``progress`` shows a bar on a terminal (a line every 10 s and one at the end elsewhere)
    for local runs; Beam's worker chatter is hidden unless the ``apache_beam`` logger's
    level is set lower than ERROR. The options are those of ``beamtok cache`` (one table,
    ``beamtok._src.core.cache_options``).

    Args:
        output_dir: Where the cache is written (local or an object store URL).
        overwrite: Remove a cache of another spec or input there instead of refusing it.
        progress: Show progress (a bar on a terminal, lines elsewhere).
        row_group_rows: Rows a Parquet row group.
        row_group_bytes: About this many bytes of tokens a row group.
        parquet_compat: Write snappy files every Parquet reader opens.
        split_bytes: Cut input files larger than this into ranges (bytes or ``"64MB"``).
        **beam_options: Beam pipeline options (``runner``, ``direct_num_workers``, ...).
    Returns:
        The cached Dataset, with this dataset's stream stages.
    Raises:
        ConfigError: The dataset already reads a cache, or an option is invalid.
        CacheError: A cache of another spec is there and ``overwrite`` is False.
    """
    if self.pipeline.root.cached:
        raise ConfigError("this dataset already reads a cache")
    root = shard_root(self.pipeline.root, "cache()")
    require("cache()", "apache_beam")
    args = beam_args(beam_options)
    start_early(
        args, lambda: tokenizers_to_warm(root.spec)
    )  # local worker processes import Beam (and load the tokenizers) while this process imports Beam
    from beamtok._src.beam.run import run_cache

    run_cache(
        root.spec,
        root.shards,
        output_dir,
        args,
        overwrite=overwrite,
        progress=progress,
        row_group_rows=row_group_rows,
        row_group_bytes=row_group_bytes,
        parquet_compat=parquet_compat,
        split_bytes=split_bytes,
    )
    from beamtok._src.cache.read.backend import CacheOrigin

    origin = CacheOrigin.open(output_dir, fingerprint=self.pipeline.root.spec_fingerprint)
    cached_root = ShardsRoot(tuple(origin.shards), origin.spec, origin, ranges=root.ranges).with_options(
        **dataclasses.asdict(root.options)
    )
    return replaced(self, root=cached_root)


def to_megatron(self: D, prefix: str, **beam_options: Any) -> dict[str, Any]:
    """Write this dataset's documents, tokenized by its per-shard steps, as Megatron-Core's
    indexed dataset ``prefix.bin``/``prefix.idx`` through a Beam pipeline (the files
    Megatron's ``preprocess_data.py`` writes for the same documents; see
    ``beamtok._src.beam.megatron`` and docs/megatron.md).

    Args:
        prefix: The output path without its ``.bin``/``.idx`` suffix (local).
        **beam_options: Beam pipeline options (``direct_running_mode``, ``direct_num_workers``...).

    Returns:
        What was written: ``files``, ``documents``, ``tokens``, ``dtype`` and the document counts.

    Raises:
        ConfigError: The dataset reads a cache or a mix, has stream stages, packs, or holds
            SFT or chat examples.
    """
    root = uncached_shard_root(self, "to_megatron()", "writes the per-shard processing")
    require("to_megatron()", "apache_beam")
    from beamtok._src.beam.megatron import run_megatron

    return run_megatron(root.spec, root.shards, prefix, beam_args(beam_options))


def cache_as_you_go(
    self: D,
    directory: str,
    *,
    row_group_rows: int | None = None,
    row_group_bytes: int | None = None,
    parquet_compat: bool = False,
) -> D:
    """This dataset, streamed on the fly while every shard it reads whole is written into a
    cache at ``directory`` (the files, manifest and checksums a Beam build writes); shards
    already cached there are read from it instead of being tokenized again. The stream and
    its states are the same as on the fly and as from the finished cache. Call it after
    the per-shard stages (tokenize, pack), before stream stages.

    Args:
        directory: Where the cache is written.
        row_group_rows: Rows a Parquet row group.
        row_group_bytes: About this many bytes of tokens a row group.
        parquet_compat: Write snappy files every Parquet reader opens.
    Returns:
        A Dataset streamed on the fly that fills the cache as it goes.
    """
    root = uncached_shard_root(self, "cache_as_you_go()", "caches the shard processing")
    if root.spec.tokenizer is None:
        raise ConfigError("a cache holds tokens: call tokenize() before cache_as_you_go()")
    if any(shard.data is not None for shard in root.shards):
        raise ConfigError("cache_as_you_go() caches files; in-memory data has no file a cache could stand for")
    from beamtok._src.cache.build.as_you_go import CachingOrigin
    from beamtok._src.cache.build.output import check_output
    from beamtok._src.cache.build.writer import check_layout
    from beamtok._src.cache.format.storage import Storage

    check_output(Storage(directory), create=False)
    layout = check_layout(
        row_group_rows,
        row_group_bytes,
        root.spec.pack.seq_len if root.spec.pack is not None else None,
        parquet_compat,
    )
    return replaced(self, root=root.with_origin(CachingOrigin(directory, root.shards, layout)))

"""Datasets of files: JSONL (plain, .gz, .zst), Parquet, plain text and MDS shards, local or
remote, each file a shard (or cut into ranges); a Hugging Face dataset's files."""

from __future__ import annotations

import os
from collections.abc import Sequence

from beamtok._src.core.spec import SourceSpec, Spec
from beamtok._src.dataset.stage_adding import D, of_shards, replaced
from beamtok._src.sources.byte_ranges import AUTO
from beamtok._src.sources.urls import Shard, expand_urls
from beamtok._src.stream.roots.shards import shard_root

__all__ = ["cut_files", "from_files", "from_mds"]


def from_files(
    cls: type[D],
    urls: str | Sequence[str],
    *,
    format: str = "auto",
    text_field: str = "text",
    columns: Sequence[str] | None = None,
    on_error: str = "raise",
    split_bytes: int | str | None = None,
) -> D:
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
    dataset = of_shards(cls, [Shard(i, url) for i, url in enumerate(expand_urls(urls))], spec)
    return dataset if split_bytes is None else cut_files(dataset, split_bytes)


def cut_files(self: D, split_bytes: int | str) -> D:
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
    return replaced(self, root=shard_root(self.pipeline.root, "cut_files()").cut(split_bytes))


def from_mds(
    cls: type[D],
    url: str | os.PathLike[str],
    *,
    split: str | None = None,
    text_field: str = "text",
    columns: Sequence[str] | None = None,
    on_error: str = "raise",
) -> D:
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
    return from_files(cls, urls, format="mds", text_field=text_field, columns=columns, on_error=on_error)

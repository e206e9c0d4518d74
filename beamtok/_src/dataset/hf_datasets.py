"""Datasets of Hugging Face ``datasets``: a loaded map-style or streamed dataset, or a dataset's
files by name or directory."""

from __future__ import annotations

import os
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.dataset import file_sources, memory_sources
from beamtok._src.dataset.stage_adding import D, of_shards
from beamtok._src.sources.memory import hf_iterable_shards

__all__ = ["from_hf"]


def from_hf(
    cls: type[D],
    dataset: Any,
    *,
    text_field: str = "text",
    shards: int = 1,
    on_error: str = "raise",
    split: str = "train",
    config: str | None = None,
) -> D:
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
        return file_sources.from_files(cls, found.urls, format=found.format, text_field=text_field, on_error=on_error)
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
        return of_shards(cls, hf_iterable_shards(dataset), memory_sources.memory_spec(text_field, on_error))
    return memory_sources.from_sequence(cls, dataset, text_field=text_field, shards=shards, on_error=on_error)

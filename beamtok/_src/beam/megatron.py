"""Megatron-Core's indexed dataset (``PREFIX.bin``/``PREFIX.idx``) written by a Beam pipeline
from the same per-shard step a cache build runs: each worker tokenizes a shard's documents
(``ShardProcessor.documents``: reading, the per-document steps, BOS/EOS) and writes them as
one part, a sequence a document; the launcher joins the parts in shard order into the one
pair Megatron's ``preprocess_data.py`` writes for the same documents (without
``--split-sentences``; ``ensure_bos_eos(bos=False)`` is its ``--append-eod``). Megatron packs
its own samples (``GPTDataset``), so the documents are not packed here.
"""

from __future__ import annotations

from beamtok._src.beam import beam_import  # noqa: F401  (first: Beam's import with its GCP warning dropped)

# isort: split

import json
import os
import shutil
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.beam.options import check_beam_args
from beamtok._src.beam.pipelines import pipeline_for
from beamtok._src.beam.worker_count import fitted_worker_args
from beamtok._src.cache.format.megatron_index import MegatronPart, merge_parts, optimal_dtype
from beamtok._src.core.spec import Spec
from beamtok._src.shards.items import NO_COUNTS, DocCounts
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.sources.urls import Shard, is_remote
from beamtok._src.transforms.tokenizer_registry import register_serialized, resolve_tokenizer, serialize_tokenizers

__all__ = ["run_megatron"]


class _WritePartFn(beam.DoFn):
    """Tokenize one shard and write its documents as a part (``shard-NNNNN.bin/.idx``, and its
    document counts beside them)."""

    def __init__(
        self, spec: Spec, shards: Sequence[Shard], parts: str, dtype: str, tokenizers: list[dict[str, Any]]
    ) -> None:
        self.spec = spec
        self.shards = list(shards)
        self.parts = parts
        self.dtype = dtype
        self.tokenizers = tokenizers

    def setup(self) -> None:
        register_serialized(self.tokenizers)
        self.processor = ShardProcessor(self.spec)
        self.processor.prepare()

    def process(self, index: int) -> Any:
        prefix = part_prefix(self.parts, index)
        part = MegatronPart(prefix, np.dtype(self.dtype))
        counts = NO_COUNTS
        for item in self.processor.documents(self.shards[index]):
            counts = counts + item.counts
            if item.value is not None:
                part.add_document(item.value.ids)
        part.finish()
        with open(prefix + ".json", "w") as f:
            json.dump(counts.to_json(), f)
        yield index


def part_prefix(parts: str, index: int) -> str:
    return os.path.join(parts, f"shard-{index:05d}")


def run_megatron(spec: Spec, shards: Sequence[Shard], prefix: str, beam_args: Sequence[str] = ()) -> dict[str, Any]:
    """Write the documents of ``shards`` through ``spec``'s per-document steps as Megatron's
    indexed dataset ``prefix.bin``/``prefix.idx``; what was written.

    Args:
        spec: The per-shard processing: tokenized, not packed, not supervised.
        shards: The input shards, in order.
        prefix: The output path without its ``.bin``/``.idx`` suffix (a local path, as
            Megatron reads it).
        beam_args: Beam pipeline options (``--direct_running_mode=multi_processing``...).

    Returns:
        ``files``, ``documents`` (written), ``tokens``, ``dtype`` and the document counts
        (``read``, ``skipped``...).

    Raises:
        ConfigError: The spec packs or is not tokenized, the records are SFT or chat examples,
            or the prefix is remote.
    """
    if not spec.tokenized or spec.tokenizer is None:
        raise ConfigError("Megatron's indexed dataset holds token ids: call tokenize() first")
    if spec.pack is not None:
        raise ConfigError(
            "Megatron packs its own samples (GPTDataset): write the documents unpacked, without concat_chunk/pad/pack_*"
        )
    if spec.supervised:
        raise ConfigError(
            "Megatron's indexed dataset keeps no loss mask: SFT and chat examples cannot be written to it"
        )
    if is_remote(prefix):
        raise ConfigError(f"{prefix}: Megatron's indexed dataset is written to a local path")
    directory = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(directory, exist_ok=True)
    parts = prefix + ".parts"
    shutil.rmtree(parts, ignore_errors=True)
    os.makedirs(parts)
    dtype = optimal_dtype(resolve_tokenizer(spec.tokenizer).vocab_size)
    args = fitted_worker_args(check_beam_args(beam_args), shards, None)
    try:
        with pipeline_for(args) as pipeline:
            fn = _WritePartFn(spec, shards, parts, dtype.str, serialize_tokenizers(spec.tokenizers))
            _ = (
                pipeline
                | "Shards" >> beam.Create([shard.index for shard in shards])
                | "Spread" >> beam.Reshuffle()
                | "WriteParts" >> beam.ParDo(fn)
            )
            pipeline.run().wait_until_finish()
        prefixes = [part_prefix(parts, shard.index) for shard in shards]
        documents, tokens = merge_parts(prefixes, prefix)
        counts = NO_COUNTS
        for part in prefixes:
            with open(part + ".json") as f:
                counts = counts + DocCounts.from_json(json.load(f))
    finally:
        shutil.rmtree(parts, ignore_errors=True)
    return {
        "files": [prefix + ".bin", prefix + ".idx"],
        "documents": documents,
        "tokens": tokens,
        "dtype": str(dtype),
        **counts.to_json(),
    }

"""The Beam transform that writes a beamtok cache (the pipelines it runs in: ``beam/pipelines.py``).

``BuildCache`` expands to::

    Create(shard numbers) | Reshuffle | Plan
        whole shards: | WholeShards | WriteShards
        ranges:       | Ranges | Reshuffle | TokenizeRanges | GroupByKey | then, for concat_chunk:
                        PlanPacking | Reshuffle | PackRows | GroupByKey | JoinParts
                      and for other packers: PackSplitShards
        both:         | Flatten | ToList | WriteManifest

(With no file large enough to cut, or ``split_bytes`` None, ``Plan`` and the range steps are
left out: ``Create | Reshuffle | WriteShards | Flatten | ToList | WriteManifest``.)

One DoFn call of ``WriteShards`` runs the shard processing over one whole shard, in order, and
streams its rows into that shard's Parquet file: packing is stateful, so it never sees batch
boundaries chosen by the runner. A file larger than ``split_bytes`` is planned as ranges
(``cache/build/ranges.py``): each is tokenized on its own worker into a temporary file whose name
is all that crosses the shuffle, with its token count. ``concat_chunk`` rows are then packed
in parallel too: each row group by the range holding its first token, from that token's
cursor, into a Parquet file of its own; ``JoinParts`` copies the row groups into the shard's
file under one footer, byte for byte the unsplit build's (``cache/build/range_pack.py``). Other
packers carry state from document to document, so ``PackSplitShards`` packs the files of one
shard in range order on one worker into the same rows. Order lives in shard numbers, range
numbers and row indices, never in the PCollection. The manifest is written last, by the final step.

Local runs use Beam's FnApiRunner directly (in-process, or ``--direct_running_mode=
multi_processing --direct_num_workers=N``, its workers started by ``beam/local_worker.py`` so
Ctrl-C is the launcher's alone: ``beam/local_runner.py``), so the DirectRunner's Prism
download is never tried. Any other ``--runner`` (DataflowRunner, PortableRunner, FlinkRunner, SparkRunner, ...)
is passed through with the rest of the Beam options.
"""

from __future__ import annotations

from beamtok._src.beam import beam_import  # noqa: F401  (first: Beam's import with its GCP warning dropped)

# isort: split

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any

import apache_beam as beam

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import check_optional_int
from beamtok._src.beam.build_steps import (
    JoinPartsFn,
    PackRowsFn,
    PackShardFn,
    PlanFn,
    PlanPackingFn,
    TokenizeRangeFn,
    WriteManifestFn,
    WriteShardFn,
    planned_as,
)
from beamtok._src.beam.shipped_tokenizers import ShippedTokenizers
from beamtok._src.cache.build.range_pack import (
    packs_in_parallel,
)
from beamtok._src.cache.build.ranges import (
    DEFAULT_SPLIT_BYTES,
)
from beamtok._src.cache.build.writer import (
    check_layout,
    rows_per_group,
    source_size,
)
from beamtok._src.cache.format.manifest import (
    TOKENIZER_FILE,
    versions,
)
from beamtok._src.cache.format.storage import Storage
from beamtok._src.core.spec import Spec
from beamtok._src.sources.readers import is_compressed, source_format
from beamtok._src.sources.urls import Shard, is_remote, split_range
from beamtok._src.transforms.tokenizer_registry import serialize_tokenizers

__all__ = ["BuildCache"]


class BuildCache(beam.PTransform):
    """Write the cache of ``shards`` under ``output`` with the shard processing of ``spec``.

    Neither the row-group layout nor the splitting of large files changes a byte of the
    cache's rows. Workers read the tokenizer from the output's ``tokenizer.json``, written
    when the transform is applied.
    """

    def __init__(
        self,
        spec: Spec,
        shards: Sequence[Shard],
        output: str,
        *,
        tokenizer_file: str | None = None,
        row_group_rows: int | None = None,
        row_group_bytes: int | None = None,
        parquet_compat: bool = False,
        split_bytes: int | None = DEFAULT_SPLIT_BYTES,
        write_tokenizer: bool = True,
    ) -> None:
        """A transform to apply to a pipeline's beginning (``pipeline | BuildCache(...)``).

        Args:
            spec: The shard processing: tokenizer, steps, packing.
            shards: The input files, in index order.
            output: The cache directory (a local path, ``gs://``, ``s3://``...).
            tokenizer_file: Where the tokenizer is kept, relative to ``output``
                (default ``tokenizer.json``).
            row_group_rows: Rows per Parquet row group.
            row_group_bytes: About this many bytes of tokens per row group instead (default
                8 MB).
            parquet_compat: Write files every Parquet reader opens (see
                ``beamtok._src.cache.format.schema.parquet_options``).
            split_bytes: Files larger than this (uncompressed JSONL, Parquet) are tokenized
                in ranges on several workers and packed in order after; None tokenizes every
                shard whole.
            write_tokenizer: Write the tokenizer when the transform is applied; False: the
                caller writes it, with :meth:`write_tokenizer_file`.

        Raises:
            ConfigError: No shards, no tokenize step, or a layout that cannot hold a row.
        """
        super().__init__()
        if not shards:
            raise ConfigError("BuildCache needs at least one shard")
        if spec.tokenizer is None:
            raise ConfigError("a cache holds tokens: the spec needs a tokenize step")
        layout = check_layout(
            row_group_rows, row_group_bytes, spec.pack.seq_len if spec.pack is not None else None, parquet_compat
        )
        check_optional_int(split_bytes, "split_bytes", minimum=1)
        self.spec = spec
        self.shards = list(shards)
        self.output = output
        self.split_bytes = split_bytes
        self.tokenizer_file = tokenizer_file
        self.layout = layout
        self.tokenizers = serialize_tokenizers(spec.tokenizers)  # the launcher writes the last to tokenizer_file
        self.shipped = ShippedTokenizers.of(self.tokenizers)
        self.write_tokenizer = write_tokenizer
        self.input_root = os.getcwd()  # of the launching machine: relative input paths are relative to it

    def write_tokenizer_file(self) -> None:
        """Write the cache's tokenizer where the workers read it (``tokenizer.json``)."""
        if self.tokenizers:
            Storage(self.output).write_bytes(
                self.tokenizer_file or TOKENIZER_FILE, json.dumps(self.tokenizers[-1]).encode()
            )

    def expand(self, pbegin: Any) -> Any:
        """The build's steps, applied by Beam.

        Args:
            pbegin: The pipeline's beginning.

        Returns:
            The PCollection of the manifest written once every shard is (it yields the
            manifest's totals).
        """
        if self.write_tokenizer:
            self.write_tokenizer_file()
        launched = self.shards
        # workers open relative paths under the launching directory, wherever they were started
        self.shards = [dataclasses.replace(shard, root=self.input_root) for shard in launched]
        try:
            return self._expand(pbegin)
        finally:
            self.shards = launched

    def _expand(self, pbegin: Any) -> Any:
        if not self._may_split():  # no file to cut: the shards go straight to the writers
            whole = (
                pbegin
                | "ShardNumbers" >> beam.Create(list(range(len(self.shards))))
                | "Spread" >> beam.Reshuffle()
                | "WriteShards"
                >> beam.ParDo(WriteShardFn(self.spec, self.shards, self.output, self.shipped, self.layout))
            )
            return self._manifest((whole,))
        planned = (
            pbegin
            | "ShardNumbers" >> beam.Create(list(range(len(self.shards))))
            | "Spread" >> beam.Reshuffle()
            | "Plan" >> beam.ParDo(PlanFn(self.spec, self.shards, self.output, self.split_bytes))
        )
        whole = (
            planned
            | "WholeShards" >> beam.FlatMap(planned_as, PlanFn.WHOLE)
            | "WriteShards" >> beam.ParDo(WriteShardFn(self.spec, self.shards, self.output, self.shipped, self.layout))
        )
        tokenized = (
            planned
            | "Ranges" >> beam.FlatMap(planned_as, PlanFn.RANGES)
            | "SpreadRanges" >> beam.Reshuffle()
            | "TokenizeRanges" >> beam.ParDo(TokenizeRangeFn(self.spec, self.shards, self.output, self.shipped))
            | "RangesOfShard" >> beam.GroupByKey()
        )
        if packs_in_parallel(self.spec):
            group = rows_per_group(
                self.spec.pack.seq_len if self.spec.pack is not None else None,
                self.layout["row_group_rows"],
                self.layout["row_group_bytes"],
            )
            split = (
                tokenized
                | "PlanPacking" >> beam.ParDo(PlanPackingFn(self.spec, group))
                | "SpreadPacking" >> beam.Reshuffle()
                | "PackRows"
                >> beam.ParDo(PackRowsFn(self.spec, self.shards, self.output, group, self.layout["parquet_compat"]))
                | "PartsOfShard" >> beam.GroupByKey()
                | "JoinParts" >> beam.ParDo(JoinPartsFn(self.spec, self.shards, self.output))
            )
        else:
            split = tokenized | "PackSplitShards" >> beam.ParDo(
                PackShardFn(self.spec, self.shards, self.output, self.layout)
            )
        return self._manifest((whole, split))

    def _may_split(self) -> bool:
        """Whether a shard may be planned as ranges: a local file larger than ``split_bytes``
        in a format that is cut, or any remote file (its size is asked on a worker)."""
        if self.split_bytes is None:
            return False
        for shard in self.shards:
            if shard.data is not None or split_range(shard.url)[1:] != (0, None):
                continue
            if is_remote(shard.url):
                return True
            fmt = source_format(shard.url, self.spec.source)
            if (
                fmt in ("jsonl", "parquet")
                and not (fmt == "jsonl" and is_compressed(shard.url))
                and (source_size(shard) or 0) > self.split_bytes
            ):
                return True
        return False

    def _manifest(self, entries: tuple[Any, ...]) -> Any:
        return (
            entries
            | "Entries" >> beam.Flatten()
            | "Collect" >> beam.combiners.ToList()
            | "WriteManifest"
            >> beam.ParDo(WriteManifestFn(self.spec, self.output, versions(), self.tokenizer_file, self.input_root))
        )

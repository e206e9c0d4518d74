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
import itertools
import json
import os
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import check_optional_int
from beamtok._src.beam.pipelines import METRICS_NAMESPACE
from beamtok._src.beam.shipped_tokenizers import ShippedTokenizers
from beamtok._src.cache.build.progress import ShardReporter
from beamtok._src.cache.build.range_pack import (
    PackedPart,
    PackTask,
    RangeTokens,
    join_parts,
    ordered_ranges,
    pack_part,
    packs_in_parallel,
    plan_pack_tasks,
)
from beamtok._src.cache.build.ranges import (
    DEFAULT_SPLIT_BYTES,
    RANGES_DIR,
    InputRange,
    plan_ranges,
    range_file,
    read_range_file,
    write_range_file,
)
from beamtok._src.cache.build.writer import (
    check_layout,
    completed_entry,
    rows_per_group,
    source_size,
    write_rows,
    write_shard,
)
from beamtok._src.cache.format.manifest import (
    RECORDS_DIR,
    SHARDS_DIR,
    TOKENIZER_FILE,
    Manifest,
    ShardEntry,
    versions,
    write_manifest,
)
from beamtok._src.cache.format.storage import Storage
from beamtok._src.core.spec import Spec
from beamtok._src.shards.document_lengths import DocumentLengths
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.sources.readers import is_compressed, source_format
from beamtok._src.sources.urls import Shard, is_remote, split_range
from beamtok._src.transforms.tokenize import serialize_tokenizers

__all__ = ["BuildCache"]


class _ShardCounters:
    """The build's Beam counters, counted from each shard's entry when it is written."""

    def __init__(self) -> None:
        self.documents = Metrics.counter(METRICS_NAMESPACE, "documents")
        self.emitted_documents = Metrics.counter(METRICS_NAMESPACE, "emitted_documents")
        self.skipped_documents = Metrics.counter(METRICS_NAMESPACE, "skipped_documents")
        self.examples = Metrics.counter(METRICS_NAMESPACE, "examples")
        self.tokens = Metrics.counter(METRICS_NAMESPACE, "tokens")
        self.shards_written = Metrics.counter(METRICS_NAMESPACE, "shards_written")
        self.shards_reused = Metrics.counter(METRICS_NAMESPACE, "shards_reused")

    def written(self, entry: ShardEntry) -> None:
        self.shards_written.inc()
        self.documents.inc(entry.documents["read"])
        self.emitted_documents.inc(entry.documents["emitted"])
        self.skipped_documents.inc(sum(entry.documents["skipped"].values()))
        for reason, n in entry.documents["skipped"].items():
            Metrics.counter(METRICS_NAMESPACE, f"skipped_{reason}").inc(n)
        self.examples.inc(entry.rows)
        self.tokens.inc(entry.tokens)


class _ShardStepFn(beam.DoFn):
    """A DoFn that runs the shard processing: the tokenizers it needs and the cache's storage."""

    def __init__(self, spec: Spec, shards: Sequence[Shard], output: str, tokenizers: ShippedTokenizers) -> None:
        self.spec = spec
        self.shards = list(shards)
        self.output = output
        self.tokenizers = tokenizers

    def setup(self) -> None:
        self.storage = Storage(self.output)
        self.tokenizers.register(self.storage)
        self.processor = ShardProcessor(self.spec)
        self.processor.prepare()


class _PlanFn(_ShardStepFn):
    """Send a shard whole to the writer (also a shard an earlier run finished: it is reused),
    or, when it is a file larger than ``split_bytes``, its ranges to the tokenizers. Each
    output is ``(WHOLE, shard number)`` or ``(RANGES, range)`` in the one main output, split
    by two ``FlatMap`` steps after it: Beam's Dask runner hands a ParDo's tagged outputs to its
    main consumer, so the build uses none."""

    WHOLE = "whole"
    RANGES = "ranges"

    def __init__(self, spec: Spec, shards: Sequence[Shard], output: str, split_bytes: int | None) -> None:
        super().__init__(spec, shards, output, ShippedTokenizers.of([]))
        self.split_bytes = split_bytes
        self.split_shards = Metrics.counter(METRICS_NAMESPACE, "split_shards")
        self.ranges = Metrics.counter(METRICS_NAMESPACE, "ranges")

    def setup(self) -> None:
        self.storage = Storage(self.output)

    def process(self, index: int) -> Any:
        shard = self.shards[index]
        parts = plan_ranges(shard, self.spec.source, self.split_bytes) if self.split_bytes is not None else []
        # a shard read whole is checked for reuse by the writer; a large one finished earlier is too
        if len(parts) <= 1 or completed_entry(self.storage, shard, self.spec.fingerprint, check_file=False) is not None:
            yield self.WHOLE, index
            return
        self.split_shards.inc()
        self.ranges.inc(len(parts))
        for part in parts:
            yield self.RANGES, part


def _planned_as(planned: tuple[str, Any], kind: str) -> list[Any]:
    """The planned element for the branch of ``kind``, or none."""
    return [planned[1]] if planned[0] == kind else []


class _WriteShardFn(_ShardStepFn):
    """Process one whole shard and write its Parquet file (or reuse a completed one)."""

    def __init__(
        self, spec: Spec, shards: Sequence[Shard], output: str, tokenizers: ShippedTokenizers, layout: dict[str, Any]
    ) -> None:
        super().__init__(spec, shards, output, tokenizers)
        self.layout = layout
        self.counters = _ShardCounters()

    def process(self, index: int) -> Any:
        shard = self.shards[index]
        entry = completed_entry(self.storage, shard, self.spec.fingerprint)
        if entry is not None:
            self.counters.shards_reused.inc()
        else:
            seq_len = self.spec.pack.seq_len if self.spec.pack is not None else None
            report = ShardReporter.from_environment(shard, self.spec.source)
            entry = write_shard(self.storage, self.processor, shard, seq_len, **self.layout, report=report)
            self.counters.written(entry)
        yield entry.to_json()


class _TokenizeRangeFn(_ShardStepFn):
    """Run the per-document steps over one range of a file; write its tokenized documents to a
    temporary file and pass on its name (never the tokens: elements stay small)."""

    def process(self, part: InputRange) -> Any:
        shard = self.shards[part.shard]
        report = ShardReporter.from_environment(shard, self.spec.source, part=part)
        documents = self.processor.documents(shard, part.start, part.stop)
        if report is not None:
            documents = report.documents(documents)
        rel = range_file(part)
        written = write_range_file(self.storage, rel, documents)
        yield part.shard, RangeTokens(part.number, part.count, rel, written.tokens)


class _PackShardFn(_ShardStepFn):
    """Pack a split shard's documents, read from its range files in order, into its Parquet
    file: the rows of the unsplit build. The range files are removed afterwards. Packing
    needs no tokenizer, so none is shipped or loaded."""

    def __init__(self, spec: Spec, shards: Sequence[Shard], output: str, layout: dict[str, Any]) -> None:
        super().__init__(spec, shards, output, ShippedTokenizers.of([]))
        self.layout = layout
        self.counters = _ShardCounters()

    def setup(self) -> None:
        self.storage = Storage(self.output)
        self.processor = ShardProcessor(self.spec)

    def process(self, element: tuple[int, Any]) -> Any:
        index, ranges = element
        shard = self.shards[index]
        files = [r.file for r in ordered_ranges(index, ranges)]
        lengths = DocumentLengths()
        documents = lengths.tally(itertools.chain.from_iterable(read_range_file(self.storage, rel) for rel in files))
        seq_len = self.spec.pack.seq_len if self.spec.pack is not None else None
        produced = self.processor.pack(index, documents)
        entry = write_rows(
            self.storage,
            shard,
            produced,
            self.spec.fingerprint,
            seq_len,
            **self.layout,
            report=None,
            document_lengths=lengths,
        )
        for rel in files:
            self.storage.delete(rel)
        self.counters.written(entry)
        yield entry.to_json()


class _PlanPackingFn(beam.DoFn):
    """The pack tasks of one split shard whose rows are cut by token offset: one per range
    holding the first token of a row group."""

    def __init__(self, spec: Spec, group: int) -> None:
        self.spec = spec
        self.group = group
        self.pack_tasks = Metrics.counter(METRICS_NAMESPACE, "pack_tasks")

    def process(self, element: tuple[int, Any]) -> Any:
        index, ranges = element
        pack = self.spec.pack
        assert pack is not None and pack.seq_len is not None  # packs_in_parallel(spec)
        tasks = plan_pack_tasks(index, ranges, pack.seq_len, self.group, pack.remainder)
        self.pack_tasks.inc(len(tasks))
        yield from tasks


class _PackRowsFn(_PackShardFn):
    """Pack one task's rows of a split shard into a Parquet file of whole row groups."""

    def __init__(self, spec: Spec, shards: Sequence[Shard], output: str, group: int, parquet_compat: bool) -> None:
        super().__init__(spec, shards, output, {"parquet_compat": parquet_compat})
        self.group = group

    def process(self, element: PackTask) -> Any:  # type: ignore[override]
        part = pack_part(
            self.storage, self.processor, element, self.group, parquet_compat=self.layout["parquet_compat"]
        )
        yield part.shard, part


class _JoinPartsFn(_PackShardFn):
    """Copy a split shard's packed row groups into its file, in row order; write its sidecar."""

    def __init__(self, spec: Spec, shards: Sequence[Shard], output: str) -> None:
        super().__init__(spec, shards, output, {})

    def process(self, element: tuple[int, Any]) -> Any:
        index, parts = element
        shard = self.shards[index]
        done = completed_entry(self.storage, shard, self.spec.fingerprint)
        if done is not None:  # a retried bundle: the join ran, and removed its parts
            yield done.to_json()
            return
        parts_list: list[PackedPart] = list(parts)
        entry = join_parts(self.storage, shard, parts_list, self.spec.fingerprint)
        self.counters.written(entry)
        yield entry.to_json()


class _WriteManifestFn(beam.DoFn):
    def __init__(
        self, spec: Spec, output: str, versions: dict[str, str], tokenizer_file: str | None, input_root: str
    ) -> None:
        self.spec = spec
        self.output = output
        self.input_root = input_root
        self.versions = versions
        self.tokenizer_file = tokenizer_file

    def process(self, entries: list[dict[str, Any]]) -> Any:
        storage = Storage(self.output)
        # every shard is written: what is left under a temporary name is a killed attempt's (a worker lost mid-write)
        for directory in (SHARDS_DIR, RECORDS_DIR, RANGES_DIR):
            storage.delete_stale_temporaries(directory)
        storage.remove_empty_dir(RANGES_DIR)
        shards = sorted((ShardEntry.from_json(e, self.output) for e in entries), key=lambda e: e.index)
        manifest = Manifest(
            self.spec.to_json(),
            self.spec.fingerprint,
            shards,
            self.versions,
            self.tokenizer_file,
            input_root=self.input_root,
        )
        yield write_manifest(storage, manifest)["totals"]


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
                >> beam.ParDo(_WriteShardFn(self.spec, self.shards, self.output, self.shipped, self.layout))
            )
            return self._manifest((whole,))
        planned = (
            pbegin
            | "ShardNumbers" >> beam.Create(list(range(len(self.shards))))
            | "Spread" >> beam.Reshuffle()
            | "Plan" >> beam.ParDo(_PlanFn(self.spec, self.shards, self.output, self.split_bytes))
        )
        whole = (
            planned
            | "WholeShards" >> beam.FlatMap(_planned_as, _PlanFn.WHOLE)
            | "WriteShards" >> beam.ParDo(_WriteShardFn(self.spec, self.shards, self.output, self.shipped, self.layout))
        )
        tokenized = (
            planned
            | "Ranges" >> beam.FlatMap(_planned_as, _PlanFn.RANGES)
            | "SpreadRanges" >> beam.Reshuffle()
            | "TokenizeRanges" >> beam.ParDo(_TokenizeRangeFn(self.spec, self.shards, self.output, self.shipped))
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
                | "PlanPacking" >> beam.ParDo(_PlanPackingFn(self.spec, group))
                | "SpreadPacking" >> beam.Reshuffle()
                | "PackRows"
                >> beam.ParDo(_PackRowsFn(self.spec, self.shards, self.output, group, self.layout["parquet_compat"]))
                | "PartsOfShard" >> beam.GroupByKey()
                | "JoinParts" >> beam.ParDo(_JoinPartsFn(self.spec, self.shards, self.output))
            )
        else:
            split = tokenized | "PackSplitShards" >> beam.ParDo(
                _PackShardFn(self.spec, self.shards, self.output, self.layout)
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
            >> beam.ParDo(_WriteManifestFn(self.spec, self.output, versions(), self.tokenizer_file, self.input_root))
        )

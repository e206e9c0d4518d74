"""The DoFns of ``BuildCache`` (``beam/build.py``), one a step: plan each shard (whole, or
ranges), write a whole shard, tokenize a range, plan and pack ``concat_chunk`` rows of a split
shard, join their parts, pack another packer's split shard in range order, and write the
manifest last; with the counters each reports."""

from __future__ import annotations

from beamtok._src.beam import beam_import  # noqa: F401  (first: Beam's import with its GCP warning dropped)

# isort: split

import itertools
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics

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
    plan_pack_tasks,
)
from beamtok._src.cache.build.ranges import (
    RANGES_DIR,
    InputRange,
    plan_ranges,
    range_file,
    read_range_file,
    write_range_file,
)
from beamtok._src.cache.build.writer import (
    completed_entry,
    write_rows,
    write_shard,
)
from beamtok._src.cache.format.manifest import (
    RECORDS_DIR,
    SHARDS_DIR,
    Manifest,
    ShardEntry,
    write_manifest,
)
from beamtok._src.cache.format.storage import Storage
from beamtok._src.core.spec import Spec
from beamtok._src.shards.document_lengths import DocumentLengths
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.sources.urls import Shard

__all__ = [
    "JoinPartsFn",
    "PackRowsFn",
    "PackShardFn",
    "PlanFn",
    "PlanPackingFn",
    "ShardCounters",
    "TokenizeRangeFn",
    "WriteManifestFn",
    "WriteShardFn",
    "planned_as",
]


class ShardCounters:
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


class ShardStepFn(beam.DoFn):
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


class PlanFn(ShardStepFn):
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


def planned_as(planned: tuple[str, Any], kind: str) -> list[Any]:
    """The planned element for the branch of ``kind``, or none."""
    return [planned[1]] if planned[0] == kind else []


class WriteShardFn(ShardStepFn):
    """Process one whole shard and write its Parquet file (or reuse a completed one)."""

    def __init__(
        self, spec: Spec, shards: Sequence[Shard], output: str, tokenizers: ShippedTokenizers, layout: dict[str, Any]
    ) -> None:
        super().__init__(spec, shards, output, tokenizers)
        self.layout = layout
        self.counters = ShardCounters()

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


class TokenizeRangeFn(ShardStepFn):
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


class PackShardFn(ShardStepFn):
    """Pack a split shard's documents, read from its range files in order, into its Parquet
    file: the rows of the unsplit build. The range files are removed afterwards. Packing
    needs no tokenizer, so none is shipped or loaded."""

    def __init__(self, spec: Spec, shards: Sequence[Shard], output: str, layout: dict[str, Any]) -> None:
        super().__init__(spec, shards, output, ShippedTokenizers.of([]))
        self.layout = layout
        self.counters = ShardCounters()

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


class PlanPackingFn(beam.DoFn):
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


class PackRowsFn(PackShardFn):
    """Pack one task's rows of a split shard into a Parquet file of whole row groups."""

    def __init__(self, spec: Spec, shards: Sequence[Shard], output: str, group: int, parquet_compat: bool) -> None:
        super().__init__(spec, shards, output, {"parquet_compat": parquet_compat})
        self.group = group

    def process(self, element: PackTask) -> Any:  # type: ignore[override]
        part = pack_part(
            self.storage, self.processor, element, self.group, parquet_compat=self.layout["parquet_compat"]
        )
        yield part.shard, part


class JoinPartsFn(PackShardFn):
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


class WriteManifestFn(beam.DoFn):
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

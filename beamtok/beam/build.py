"""The Beam transform that writes a beamtok cache, and how local pipelines are made.

``BuildCache`` expands to ``Create(shard numbers) | Reshuffle | ParDo(write one shard) |
ToList | ParDo(write manifest)``. One DoFn call runs the per-shard step over one whole shard,
in order, and streams its rows into that shard's Parquet file: packing is stateful, so it
never sees batch boundaries chosen by the runner. Order lives in shard numbers and row
indices, never in the PCollection. The manifest is written last, by the final step.

Local runs use Beam's FnApiRunner directly (in-process, or ``--direct_running_mode=
multi_processing --direct_num_workers=N``), so the DirectRunner's Prism download is never
tried. Any other ``--runner`` (DataflowRunner, PortableRunner, FlinkRunner, SparkRunner, ...)
is passed through with the rest of the Beam options.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beamtok.cache.manifest import MANIFEST, Manifest, ShardEntry, versions
from beamtok.cache.progress import ShardReporter
from beamtok.cache.storage import Storage
from beamtok.cache.writer import completed_entry, write_shard
from beamtok.errors import ConfigError
from beamtok.shard import ShardProcessor
from beamtok.sources.urls import Shard
from beamtok.spec import Spec
from beamtok.transforms.tokenize import register_serialized, serialize_tokenizers
from beamtok.validate import check_optional_int

__all__ = ["LOCAL_RUNNERS", "METRICS_NAMESPACE", "BuildCache", "beam_counters", "is_local", "make_pipeline", "versions"]

LOCAL_RUNNERS = (None, "DirectRunner", "FnApiRunner")
METRICS_NAMESPACE = "beamtok"


class _WriteShardFn(beam.DoFn):
    """Process one whole shard and write its Parquet file (or reuse a completed one)."""

    def __init__(self, spec: Spec, shards: Sequence[Shard], output: str, tokenizers: list[dict[str, Any]], layout: dict[str, int | None]) -> None:
        self.spec = spec
        self.shards = list(shards)
        self.output = output
        self.tokenizers = tokenizers  # serialized, so remote workers need no local path
        self.layout = layout
        self.documents = Metrics.counter(METRICS_NAMESPACE, "documents")
        self.emitted_documents = Metrics.counter(METRICS_NAMESPACE, "emitted_documents")
        self.skipped_documents = Metrics.counter(METRICS_NAMESPACE, "skipped_documents")
        self.examples = Metrics.counter(METRICS_NAMESPACE, "examples")
        self.tokens = Metrics.counter(METRICS_NAMESPACE, "tokens")
        self.shards_written = Metrics.counter(METRICS_NAMESPACE, "shards_written")
        self.shards_reused = Metrics.counter(METRICS_NAMESPACE, "shards_reused")

    def setup(self) -> None:
        register_serialized(self.tokenizers)
        self.storage = Storage(self.output)
        self.processor = ShardProcessor(self.spec)
        self.processor.prepare()

    def process(self, index: int) -> Any:
        shard = self.shards[index]
        entry = completed_entry(self.storage, shard, self.spec.fingerprint)
        if entry is not None:
            self.shards_reused.inc()
        else:
            seq_len = self.spec.pack.seq_len if self.spec.pack is not None else None
            report = ShardReporter.from_environment(shard, self.spec.source)
            entry = write_shard(self.storage, self.processor, shard, seq_len, **self.layout, report=report)
            self.shards_written.inc()
            self.documents.inc(entry.documents["read"])
            self.emitted_documents.inc(entry.documents["emitted"])
            self.skipped_documents.inc(sum(entry.documents["skipped"].values()))
            for reason, n in entry.documents["skipped"].items():
                Metrics.counter(METRICS_NAMESPACE, f"skipped_{reason}").inc(n)
            self.examples.inc(entry.rows)
            self.tokens.inc(entry.tokens)
        yield entry.to_json()


class _WriteManifestFn(beam.DoFn):
    def __init__(self, spec: Spec, output: str, versions: dict[str, str], tokenizer_file: str | None, input_root: str) -> None:
        self.spec = spec
        self.output = output
        self.input_root = input_root
        self.versions = versions
        self.tokenizer_file = tokenizer_file

    def process(self, entries: list[dict[str, Any]]) -> Any:
        storage = Storage(self.output)
        shards = sorted((ShardEntry.from_json(e, self.output) for e in entries), key=lambda e: e.index)
        manifest = Manifest(
            self.spec.to_json(), self.spec.fingerprint, shards, self.versions, self.tokenizer_file, input_root=self.input_root
        )
        storage.write_bytes(MANIFEST, json.dumps(manifest.to_json(), indent=1).encode())
        yield manifest.to_json()["totals"]


class BuildCache(beam.PTransform):
    """Write the cache of ``shards`` under ``output`` with the per-shard step of ``spec``.

    Row groups hold ``row_group_rows`` rows, or about ``row_group_bytes`` of tokens (default
    8 MB); the layout never changes the rows.
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
    ) -> None:
        super().__init__()
        if not shards:
            raise ConfigError("BuildCache needs at least one shard")
        if spec.tokenizer is None:
            raise ConfigError("a cache holds tokens: the spec needs a tokenize step")
        check_optional_int(row_group_rows, "row_group_rows", minimum=1)
        check_optional_int(row_group_bytes, "row_group_bytes", minimum=1)
        if row_group_rows is not None and row_group_bytes is not None:
            raise ConfigError("give row_group_rows or row_group_bytes, not both")
        self.spec = spec
        self.shards = list(shards)
        self.output = output
        self.tokenizer_file = tokenizer_file
        self.layout = {"row_group_rows": row_group_rows, "row_group_bytes": row_group_bytes}
        self.tokenizers = serialize_tokenizers(spec.tokenizers)
        self.input_root = os.getcwd()  # of the launching machine: relative input paths are relative to it

    def expand(self, pbegin: Any) -> Any:
        return (
            pbegin
            | "ShardNumbers" >> beam.Create(list(range(len(self.shards))))
            | "Spread" >> beam.Reshuffle()
            | "WriteShards" >> beam.ParDo(_WriteShardFn(self.spec, self.shards, self.output, self.tokenizers, self.layout))
            | "Collect" >> beam.combiners.ToList()
            | "WriteManifest" >> beam.ParDo(_WriteManifestFn(self.spec, self.output, versions(), self.tokenizer_file, self.input_root))
        )


def make_pipeline(beam_args: Sequence[str]) -> beam.Pipeline:
    """A Beam pipeline for these options; local runs are pinned to the FnApiRunner."""
    options = PipelineOptions(list(beam_args))
    if options.view_as(StandardOptions).runner in LOCAL_RUNNERS:
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return beam.Pipeline(runner=FnApiRunner(), options=options)
    return beam.Pipeline(options=options)


def is_local(pipeline: beam.Pipeline) -> bool:
    return pipeline.options.view_as(StandardOptions).runner in LOCAL_RUNNERS


def beam_counters(result: Any) -> dict[str, int]:
    """The pipeline's beamtok counters (committed values where the runner has them)."""
    try:
        found = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))["counters"]
    except Exception:  # some runners report no metrics
        return {}
    out: dict[str, int] = {}
    for counter in found:
        value = counter.committed if counter.committed is not None else counter.attempted
        out[counter.key.metric.name] = out.get(counter.key.metric.name, 0) + int(value or 0)
    return out

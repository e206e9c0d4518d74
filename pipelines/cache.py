"""Build a beamtok Parquet cache with Apache Beam.

The pipeline is ``Create(shard numbers) | Reshuffle | ParDo(write one shard) | ToList |
Map(write manifest)``. One DoFn call runs the per-shard step over one whole shard, in order,
and streams its rows into that shard's Parquet file: packing is stateful, so it never sees
batch boundaries chosen by the runner. Order lives in shard numbers and row indices, never in
the PCollection. The manifest is written last, by the final step.

Local runs use Beam's FnApiRunner directly (in-process, or ``--direct_running_mode=
multi_processing --direct_num_workers=N``), so the DirectRunner's Prism download is never
tried. Any other ``--runner`` (DataflowRunner, PortableRunner, FlinkRunner, SparkRunner, ...)
is passed through with the rest of the Beam options.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from beamtok.cache.manifest import MANIFEST, SHARDS_DIR, TOKENIZER_FILE, Manifest, ShardEntry, read_manifest
from beamtok.cache.storage import Storage
from beamtok.cache.writer import completed_entry, write_shard
from beamtok.errors import CacheError, ConfigError
from beamtok.shard import ShardProcessor
from beamtok.sources.urls import Shard
from beamtok.spec import Spec
from beamtok.transforms.tokenize import register_serialized, serialize_tokenizers

__all__ = ["LOCAL_RUNNERS", "BuildCache", "beam_counters", "make_pipeline", "prepare_output", "run_cache"]

LOCAL_RUNNERS = (None, "DirectRunner", "FnApiRunner")
METRICS_NAMESPACE = "beamtok"


class _WriteShardFn(beam.DoFn):
    """Process one whole shard and write its Parquet file (or reuse a completed one)."""

    def __init__(self, spec: Spec, shards: Sequence[Shard], output: str, tokenizers: list[dict[str, Any]], layout: dict[str, int | None]) -> None:
        self.spec = spec
        self.layout = layout
        self.shards = list(shards)
        self.output = output
        self.tokenizers = tokenizers  # serialized, so remote workers need no local path
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
            entry = write_shard(self.storage, self.processor, shard, seq_len, **self.layout)
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
    def __init__(self, spec: Spec, output: str, versions: dict[str, str], tokenizer_file: str | None) -> None:
        self.spec = spec
        self.output = output
        self.versions = versions
        self.tokenizer_file = tokenizer_file

    def process(self, entries: list[dict[str, Any]]) -> Any:
        storage = Storage(self.output)
        shards = sorted((ShardEntry.from_json(e, self.output) for e in entries), key=lambda e: e.index)
        manifest = Manifest(self.spec.to_json(), self.spec.fingerprint, shards, self.versions, self.tokenizer_file)
        storage.write_bytes(MANIFEST, json.dumps(manifest.to_json(), indent=1).encode())
        yield manifest.to_json()["totals"]


class BuildCache(beam.PTransform):
    """Write the cache of ``shards`` under ``output`` with the per-shard step of ``spec``."""

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
        for name, value in (("row_group_rows", row_group_rows), ("row_group_bytes", row_group_bytes)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if row_group_rows is not None and row_group_bytes is not None:
            raise ConfigError("give row_group_rows or row_group_bytes, not both")
        self.layout = {"row_group_rows": row_group_rows, "row_group_bytes": row_group_bytes}
        if not shards:
            raise ConfigError("BuildCache needs at least one shard")
        if spec.tokenizer is None:
            raise ConfigError("a cache holds tokens: the spec needs a tokenize step")
        self.spec = spec
        self.shards = list(shards)
        self.output = output
        self.tokenizer_file = tokenizer_file
        self.tokenizers = serialize_tokenizers(spec.tokenizers)

    def expand(self, pbegin: Any) -> Any:
        return (
            pbegin
            | "ShardNumbers" >> beam.Create(list(range(len(self.shards))))
            | "Spread" >> beam.Reshuffle()
            | "WriteShards" >> beam.ParDo(_WriteShardFn(self.spec, self.shards, self.output, self.tokenizers, self.layout))
            | "Collect" >> beam.combiners.ToList()
            | "WriteManifest" >> beam.ParDo(_WriteManifestFn(self.spec, self.output, versions(), self.tokenizer_file))
        )


def versions() -> dict[str, str]:
    import pyarrow
    import tokenizers

    import beamtok

    found = {"beamtok": beamtok.__version__, "apache_beam": beam.__version__, "tokenizers": tokenizers.__version__, "pyarrow": pyarrow.__version__}
    try:
        import transformers

        found["transformers"] = transformers.__version__
    except ImportError:
        pass
    found["python"] = sys.version.split()[0]
    return found


def make_pipeline(beam_args: Sequence[str]) -> beam.Pipeline:
    """A Beam pipeline for these options; local runs are pinned to the FnApiRunner."""
    options = PipelineOptions(list(beam_args))
    runner = options.view_as(StandardOptions).runner
    if runner in LOCAL_RUNNERS:
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return beam.Pipeline(runner=FnApiRunner(), options=options)
    return beam.Pipeline(options=options)


def prepare_output(storage: Storage, spec: Spec, *, overwrite: bool) -> None:
    """Refuse a directory holding another spec's cache (unless ``overwrite``); mark it unfinished."""
    fingerprint = spec.fingerprint
    found: set[str] = set()
    if storage.exists(MANIFEST):
        try:
            found.add(read_manifest(storage).fingerprint)
        except CacheError:
            found.add("unreadable manifest")
    for name in storage.list(SHARDS_DIR):
        if name.endswith(".json"):
            found.add(json.loads(storage.read_bytes(f"{SHARDS_DIR}/{name}")).get("fingerprint", "?"))
    others = found - {fingerprint}
    if others and not overwrite:
        raise CacheError(
            f"{storage.url} holds a cache built with spec {sorted(others)[0]}, not {fingerprint}; "
            "pass --overwrite to replace it, or choose another --output"
        )
    if overwrite and others:
        for name in storage.list(SHARDS_DIR):
            storage.delete(f"{SHARDS_DIR}/{name}")
    storage.delete(MANIFEST)  # the cache is unfinished until the new manifest is written
    storage.delete_stale_temporaries(SHARDS_DIR)


class _Progress(threading.Thread):
    """Print shards done / total and tokens/s while a local pipeline runs."""

    def __init__(self, storage: Storage, total: int, interval: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.storage, self.total, self.interval = storage, total, interval
        self.before = set(self._done())
        self.started = time.perf_counter()
        self.finished = threading.Event()

    def _done(self) -> list[str]:
        return [n for n in self.storage.list(SHARDS_DIR) if n.endswith(".json")]

    def report(self) -> None:
        done = self._done()
        tokens = sum(json.loads(self.storage.read_bytes(f"{SHARDS_DIR}/{n}"))["tokens"] for n in done if n not in self.before)
        rate = tokens / max(time.perf_counter() - self.started, 1e-9)
        print(f"beamtok: {len(done)}/{self.total} shards done, {tokens:,} tokens written, {rate / 1e6:.2f}M tokens/s", file=sys.stderr)

    def run(self) -> None:
        while not self.finished.wait(self.interval):
            self.report()


def run_cache(
    spec: Spec,
    shards: Sequence[Shard],
    output: str,
    beam_args: Sequence[str] = (),
    *,
    overwrite: bool = False,
    progress: bool = True,
    row_group_rows: int | None = None,
    row_group_bytes: int | None = None,
) -> Manifest:
    """Build (or complete) the cache of ``shards`` under ``output``; return its manifest."""
    if spec.tokenizer is None:
        raise ConfigError("a cache holds tokens: call tokenize() before cache()")
    storage = Storage(output)
    prepare_output(storage, spec, overwrite=overwrite)
    transform = BuildCache(
        spec, shards, output, tokenizer_file=TOKENIZER_FILE, row_group_rows=row_group_rows, row_group_bytes=row_group_bytes
    )
    storage.write_bytes(TOKENIZER_FILE, json.dumps(transform.tokenizers[-1]).encode())
    pipeline = make_pipeline(beam_args)
    _ = pipeline | BuildCache.__name__ >> transform
    local = pipeline.options.view_as(StandardOptions).runner in LOCAL_RUNNERS
    monitor = _Progress(storage, len(shards)) if progress and local else None
    if monitor is not None:
        monitor.start()
    try:
        result = pipeline.run()
        result.wait_until_finish()
    finally:
        if monitor is not None:
            monitor.finished.set()
    if monitor is not None:
        monitor.report()
    if not storage.exists(MANIFEST):
        raise CacheError(f"{output}: the pipeline finished but wrote no {MANIFEST}")
    manifest = read_manifest(storage)
    counters = beam_counters(result)
    if counters and progress:
        print(f"beamtok: Beam counters {json.dumps(counters, sort_keys=True)}", file=sys.stderr)
    _check_counters(counters, manifest)
    return manifest


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


def _check_counters(counters: dict[str, int], manifest: Manifest) -> None:
    """Documents counted by Beam must equal the manifest's, when every shard was written now."""
    if not counters or counters.get("shards_reused", 0) or counters.get("shards_written", 0) != len(manifest.shards):
        return
    documents = manifest.totals["documents"]
    skipped = {k.removeprefix("skipped_"): v for k, v in counters.items() if k.startswith("skipped_") and k != "skipped_documents" and v}
    found = {"read": counters.get("documents", 0), "emitted": counters.get("emitted_documents", 0), "skipped": skipped}
    want = {"read": documents["read"], "emitted": documents["emitted"], "skipped": {k: v for k, v in documents["skipped"].items() if v}}
    if found != want:
        raise CacheError(f"document counts disagree: Beam counted {found}, the manifest holds {want}")



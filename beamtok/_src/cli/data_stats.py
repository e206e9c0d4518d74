"""What is in a cache or a sample of input files: counts, per-shard figures and distributions.

Both read examples in shard order (a cache's rows, or the on-the-fly stream of the files), so
the same figures come out for a cache and for the files it was built from. Document lengths
are the tokenized documents' own, before packing: a cache's build records them per shard
(:mod:`beamtok._src.shards.document_lengths`), and the files' figures tally the same processing.
A cache whose build did not record them (written as it streamed, or before they were
recorded) has them rebuilt from its rows' pieces: where the packing mode's ``token`` is an
offset, a row's first piece continues the open document when the row starts ``token`` tokens
into it; under a window packer (``pack_examples``, ``pack_documents``) every piece is taken as
a document, which pieces of documents cut apart are not.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.shards.document_lengths import DocumentLengths

__all__ = ["DataStats", "cache_stats", "describe_stats", "files_stats", "percentiles"]

QUANTILES = (("p10", 10), ("p50", 50), ("p90", 90), ("p99", 99))


def percentiles(values: Sequence[float] | np.ndarray) -> dict[str, float] | None:
    """count, mean, min, p10, p50, p90, p99 and max of ``values`` (None when empty)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return None
    out: dict[str, float] = {"count": int(array.size), "mean": float(array.mean()), "min": float(array.min())}
    for name, q in QUANTILES:
        out[name] = float(np.percentile(array, q))
    out["max"] = float(array.max())
    return out


@dataclass
class DataStats:
    """Figures gathered from examples, in shard order, and the documents' lengths where they
    were recorded (``recorded``; else rebuilt from the rows' pieces)."""

    sft: bool = False
    token_offsets: bool = True  # a row's ``token`` is an offset into its first piece's document
    recorded: DocumentLengths | None = None
    rows: int = 0
    tokens: int = 0
    pad_tokens: int = 0
    trained_tokens: int = 0
    row_lengths: set[int] = field(default_factory=set)
    row_fill: list[float] = field(default_factory=list)
    document_tokens: list[int] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    completion_tokens: list[int] = field(default_factory=list)
    shard_rows: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    shard_tokens: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    _open: int = 0
    _shard: int | None = None

    def add(self, example: dict[str, Any]) -> None:
        """Count one example (a packed row, or one document's example)."""
        shard = int(example["shard"])
        if shard != self._shard:
            self.close_document()
            self._shard = shard
        segments = np.asarray(example["segment_ids"])
        mask = np.asarray(example["loss_mask"])
        real = np.flatnonzero(segments > 0)
        self.rows += 1
        self.tokens += int(real.size)
        self.pad_tokens += int(segments.size - real.size)
        self.trained_tokens += int(mask[real].sum())
        self.row_lengths.add(int(segments.size))
        self.row_fill.append(real.size / segments.size if segments.size else 0.0)
        self.shard_rows[shard] += 1
        self.shard_tokens[shard] += int(real.size)
        if real.size == 0:
            return
        ids = segments[real]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], ids.size]
        offset = int(example.get("token", 0)) if self.token_offsets else 0
        for a, b in zip(starts.tolist(), ends.tolist()):
            if a > 0 or offset == 0:
                self.close_document()
                self._open = b - a
            else:  # the row starts inside the open document, ``offset`` tokens into it
                self._open = max(self._open, offset + b - a)
            if self.sft:
                trained = int(mask[real[a:b]].sum())
                self.completion_tokens.append(trained)
                self.prompt_tokens.append(b - a - trained)

    def close_document(self) -> None:
        if self._open:
            self.document_tokens.append(self._open)
        self._open = 0

    def to_json(self) -> dict[str, Any]:
        self.close_document()
        total = self.tokens + self.pad_tokens
        out: dict[str, Any] = {
            "rows": self.rows,
            "tokens": self.tokens,
            "pad_tokens": self.pad_tokens,
            "padding_waste": self.pad_tokens / total if total else 0.0,
            "trained_fraction": self.trained_tokens / self.tokens if self.tokens else 0.0,
            "row_length": sorted(self.row_lengths)[0] if len(self.row_lengths) == 1 else None,
            "document_tokens": percentiles(self.document_tokens if self.recorded is None else self.recorded.values()),
            "document_tokens_from": "rows" if self.recorded is None else "documents",
            "row_fill": percentiles(self.row_fill) if len(self.row_lengths) == 1 else None,
        }
        if self.sft:
            out["prompt_tokens"] = percentiles(self.prompt_tokens)
            out["completion_tokens"] = percentiles(self.completion_tokens)
        return out


def _is_sft(spec_json: dict[str, Any]) -> bool:
    return any(step.get("op") in ("tokenize_sft", "tokenize_chat") for step in spec_json.get("steps", []))


def _packing_named(pack: Any) -> dict[str, Any] | None:
    """A spec's packing with the Dataset method that asks for it (``stage``, and ``method``
    for pack_examples) in place of the name the spec stores."""
    from beamtok._src.transforms.packing_modes import PACKING_MODES

    mode = PACKING_MODES.get(str(pack.get("mode"))) if isinstance(pack, dict) else None
    if mode is None:
        return pack
    named = {"stage": mode.API, **({"method": mode.NAME} if mode.API == "pack_examples" else {})}
    return {**named, **{k: v for k, v in pack.items() if k != "mode" and v is not None}}


def _token_offsets(spec_json: dict[str, Any]) -> bool:
    """Whether the rows' ``token`` of this spec's packing is a token offset."""
    from beamtok._src.transforms.packing_modes import PACKING_MODES

    pack = spec_json.get("pack")
    mode = PACKING_MODES.get(str(pack.get("mode"))) if isinstance(pack, dict) else None
    return mode is None or mode.ROW_TOKEN == "tokens"


def _recorded_lengths(directory: str, shards: int) -> DocumentLengths | None:
    """Every shard's recorded document lengths, added up; None unless all have them."""
    from beamtok._src.cache.build.writer import recorded_document_lengths
    from beamtok._src.cache.format.storage import Storage

    storage = Storage(directory)
    total = DocumentLengths()
    for index in range(shards):
        lengths = recorded_document_lengths(storage, index)
        if lengths is None:
            return None
        total = total + lengths
    return total


def cache_stats(directory: str, *, limit: int | None = None) -> tuple[dict[str, Any], DataStats]:
    """Figures of a cache: the manifest's totals and per-shard table, and distributions over
    its rows (the first ``limit`` rows in shard order, or all)."""
    from beamtok import Dataset
    from beamtok._src.cache.read.reader import Cache

    cache = Cache(directory)
    manifest = cache.manifest
    gathered = DataStats(
        sft=_is_sft(manifest.spec),
        token_offsets=_token_offsets(manifest.spec),
        recorded=_recorded_lengths(directory, len(manifest.shards)),
    )
    it = Dataset.from_cache(directory).interleave(1).iter()
    for example in it:
        if limit is not None and gathered.rows >= limit:
            break
        gathered.add(example)
    summary: dict[str, Any] = {
        "path": directory,
        "kind": "cache",
        "spec": manifest.fingerprint,
        "packing": _packing_named(manifest.spec.get("pack")),
        "documents": manifest.totals["documents"],
        "totals": {k: manifest.totals[k] for k in ("shards", "rows", "tokens", "pad_tokens") if k in manifest.totals},
        "read": {**gathered.to_json(), "complete": gathered.rows == manifest.totals["rows"]},
        "shards": [
            {
                "shard": e.index,
                "url": e.url,
                "rows": e.rows,
                "tokens": e.tokens,
                "pad_tokens": e.pad_tokens,
                "documents": e.documents["read"],
                "skipped": sum(e.documents["skipped"].values()),
            }
            for e in manifest.shards
        ],
    }
    return summary, gathered


def files_stats(dataset: Any, *, documents: int) -> tuple[dict[str, Any], DataStats]:
    """Figures of the first ``documents`` documents of each input file of ``dataset`` (an
    on-the-fly Dataset with a tokenize step), read shard by shard."""
    from beamtok import Dataset
    from beamtok._src.dataset.stage_adding import of_shards

    if not isinstance(dataset, Dataset) or dataset.spec.tokenizer is None:
        raise ConfigError("stats of input files need a tokenizer (--tokenizer)")
    from beamtok._src.shards.processor import ShardProcessor

    spec_json = dataset.spec.to_json()
    recorded = DocumentLengths()
    gathered = DataStats(sft=_is_sft(spec_json), token_offsets=_token_offsets(spec_json), recorded=recorded)
    processor = ShardProcessor(dataset.spec)
    shards = []
    counts: dict[str, Any] = {"read": 0, "emitted": 0, "skipped": defaultdict(int), "truncated": 0}
    for shard in dataset.shards:
        it = of_shards(Dataset, (shard,), dataset.spec).iter()
        rows_before = gathered.rows
        tokens_before = gathered.tokens
        complete = True
        done = it.stats()["documents"]
        for example in it:
            gathered.add(example)
            done = it.stats()["documents"]
            if done["read"] >= documents:
                complete = next(it, None) is None  # counted as read above only if it exists
                break
        # the same documents' own lengths, as a cache build records them (the rows cannot always say)
        for _ in recorded.tally(itertools.islice(processor.documents(shard), done["read"])):
            pass
        counts["read"] += done["read"]
        counts["emitted"] += done["emitted"]
        counts["truncated"] += done["truncated_docs"]
        for reason, n in done["skipped"].items():
            counts["skipped"][reason] += n
        shards.append(
            {
                "shard": shard.index,
                "url": shard.url,
                "rows": gathered.rows - rows_before,
                "tokens": gathered.tokens - tokens_before,
                "documents": done["read"],
                "skipped": sum(done["skipped"].values()),
                "complete": complete,
            }
        )
        gathered.close_document()
    counts["skipped"] = dict(sorted(counts["skipped"].items()))
    summary = {
        "path": [s.url for s in dataset.shards],
        "kind": "files",
        "spec": dataset.spec_fingerprint,
        "documents": counts,
        "sample": {"documents_per_file": documents, "complete": all(s["complete"] for s in shards)},
        "read": gathered.to_json(),
        "shards": shards,
    }
    return summary, gathered


def describe_stats(summary: dict[str, Any]) -> str:
    """The summary as text for people."""
    read = summary["read"]
    docs = summary["documents"]
    lines = []
    if summary["kind"] == "cache":
        totals = summary["totals"]
        lines.append(
            f"cache {summary['path']} (spec {summary['spec']}): {totals['shards']} shards, {totals['rows']:,} rows, {totals['tokens']:,} tokens"
        )
        if summary.get("packing"):
            from beamtok._src.transforms.packing_names import packing_words

            lines.append(f"packing: {packing_words(summary['packing'])}")
        if not read["complete"]:
            lines.append(f"distributions below over the first {read['rows']:,} rows")
    else:
        sample = summary["sample"]
        whole = (
            "whole files"
            if sample["complete"]
            else f"the first {sample['documents_per_file']:,} documents of each file"
        )
        lines.append(
            f"{len(summary['shards'])} input file(s), {whole}: {read['rows']:,} examples, {read['tokens']:,} tokens"
        )
        if "tokenizer_engine" in summary:
            lines.append(f"tokenized by {summary['tokenizer_engine']}")
    skipped = ", ".join(f"{reason} {n:,}" for reason, n in docs["skipped"].items()) or "none"
    lines.append(
        f"documents: {docs['read']:,} read, {docs['emitted']:,} emitted, skipped: {skipped}; truncated: {docs['truncated']:,}"
    )
    lines.append(
        f"tokens: {read['tokens']:,} real, {read['pad_tokens']:,} padding (waste {read['padding_waste']:.2%}); "
        f"trained on {read['trained_fraction']:.2%}"
    )
    from_rows = read.get("document_tokens_from") == "rows"
    document_label = (
        "document length (tokens, rebuilt from the rows: not recorded by this build)"
        if from_rows
        else "document length (tokens)"
    )
    for name, label in (
        ("document_tokens", document_label),
        ("row_fill", "row fill"),
        ("prompt_tokens", "prompt tokens"),
        ("completion_tokens", "completion tokens"),
    ):
        dist = read.get(name)
        if dist:
            fmt = "{:.1%}" if name == "row_fill" else "{:,.0f}"
            figures = ", ".join(f"{k} {fmt.format(dist[k])}" for k in ("min", "p10", "p50", "p90", "p99", "max"))
            lines.append(f"{label}: {figures}; mean {fmt.format(dist['mean'])} over {dist['count']:,}")
    lines.append("shard  rows        tokens          documents  skipped  url")
    for s in summary["shards"]:
        lines.append(
            f"{s['shard']:<6} {s['rows']:<11,} {s['tokens']:<15,} {s['documents']:<10,} {s['skipped']:<8,} {s['url']}"
        )
    return "\n".join(lines)

"""Internet scale, simulated: a cache of 100,000 shards read by 1,024 ranks x 8 DataLoader
workers, a world-size change to 768 ranks, and a mix of 1,000 sources.

    python benchmarks/internet_scale.py [--shards 100000] [--ranks 1024] [--workers 8]
                                        [--new-ranks 768] [--sources 1000]

The cache is real: ``--shards`` Parquet files of two rows of 64 tokens each (written by the
cache writer, built once into benchmarks/work and reused), a manifest naming them all, the
spec of a real GPT-2 ``concat_chunk(64)`` pipeline. Reader ``rank * workers + worker`` of
``ranks * workers`` is the reader that rank's DataLoader worker is (``ReaderSplit.part``).
Reported, each per-rank figure from fresh processes (a rank pays for its own imports and
manifest):
- cache open and time to the first batch for sample readers, and their peak memory (RSS)
  beside a process that only imported beamtok;
- the JSON size of one reader's state and of all of them;
- a world-size change (``--elastic-ranks`` to ``--elastic-new-ranks``, x ``--workers``, over
  a cache of ``--elastic-shards``; one process plays every reader and opens every shard, so
  the full 1,024 -> 768 over 100k shards is out of reach here): every old reader takes a few batches, saves its state; the new readers resume from
  all of them and read to the end; every (shard, row) must be read exactly once over both,
  checked on the rows' provenance;
- a mix of ``--sources`` caches of ``--shards-per-source`` shards (weights uneven) split by
  examples over the same readers: time to a reader's first batch, its memory, the shard files
  it opened, its state; and a world-size change of that mix (to ``--mix-new-ranks`` ranks):
  a new reader's merge of every old reader's state and first batch, checked against the
  one mixed stream;
- the global shuffle of the ``--shards`` cache read by those readers: spread windows of one
  unit a reader (a shard's row group each) against the whole-cache permutation decoding row
  groups: open, first batch, row groups decoded over 22 batches, state.
Writes benchmarks/results/internet_scale.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import multiprocessing
import platform
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import ROOT, WORK, measured, peak_rss, write_results  # noqa: E402

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
SEQ = 64
ROWS = 2  # per shard


# ------------------------------------------------------------------ the cache


def _spec() -> Any:
    from beamtok import Dataset

    return Dataset.from_sequence(["x"]).tokenize(TOKENIZER).concat_chunk(SEQ)._pipeline.root.spec


def _write_shards(args: tuple[str, list[int], str]) -> list[dict[str, Any]]:
    from beamtok._src.cache.build.writer import write_rows
    from beamtok._src.cache.format.storage import Storage
    from beamtok._src.shards.items import DocCounts, Produced, ShardCursor
    from beamtok._src.sources.urls import Shard

    directory, indices, fingerprint = args
    storage = Storage(directory)
    entries = []
    for i in indices:

        def rows(i: int = i) -> Any:
            for r in range(ROWS):
                last = r == ROWS - 1
                example = {
                    "input_ids": (np.arange(SEQ, dtype=np.int32) + i * 7 + r) % 50000,
                    "segment_ids": np.ones(SEQ, np.int32),
                    "position_ids": np.arange(SEQ, dtype=np.int32),
                    "loss_mask": np.ones(SEQ, np.int8),
                    "shard": i,
                    "index": r,
                    "doc": 0,
                    "token": r * SEQ,
                }
                after = ShardCursor(r + 1, 0, 0, True) if last else ShardCursor(r + 1, 0, (r + 1) * SEQ)
                yield Produced(example, after, DocCounts(read=1, emitted=1) if last else DocCounts())

        entries.append(
            write_rows(storage, Shard(i, f"synthetic/part-{i:06d}.jsonl"), rows(), fingerprint, SEQ).to_json()
        )
    return entries


def build_caches(directories: list[Path], shards: int) -> list[str]:
    """Caches of ``shards`` synthetic shards each in ``directories`` (those not built yet)."""
    from beamtok._src.cache.format.manifest import MANIFEST, Manifest, ShardEntry, versions, write_manifest
    from beamtok._src.cache.format.shard_table import INLINE_SHARDS
    from beamtok._src.cache.format.storage import Storage

    for d in directories:  # a cache built before shard tables: its manifest rewritten as a build writes it now
        if (d / MANIFEST).exists() and shards > INLINE_SHARDS:
            data = json.loads((d / MANIFEST).read_text())
            if "shards" in data:
                entries = [ShardEntry.from_json(e, str(d)) for e in data["shards"]]
                write_manifest(Storage(str(d)), Manifest(data["spec"], data["fingerprint"], entries, data["versions"]))
    todo = [d for d in directories if not (d / MANIFEST).exists()]
    if todo:
        spec = _spec()
        chunks = [
            (str(d), list(range(k, min(k + 1000, shards))), spec.fingerprint)
            for d in todo
            for k in range(0, shards, 1000)
        ]
        start = time.perf_counter()
        for d in todo:
            d.mkdir(parents=True, exist_ok=True)
        with multiprocessing.get_context("spawn").Pool(os.cpu_count()) as pool:
            written = pool.map(_write_shards, chunks)
        for d in todo:
            entries = [
                ShardEntry.from_json(e, "built")
                for (where, _, _), part in zip(chunks, written)
                if where == str(d)
                for e in part
            ]
            write_manifest(Storage(str(d)), Manifest(spec.to_json(), spec.fingerprint, entries, versions()))
        print(
            f"  built {len(todo)} cache(s) of {shards} shards in {time.perf_counter() - start:.0f} s", file=sys.stderr
        )
    return [str(d) for d in directories]


# ------------------------------------------------------------ one reader, fresh


def reader(cache: Any, part: int, parts: int, workers: int) -> Any:
    """Reader ``part`` of ``parts`` of a cache (a directory, or a Dataset opened once).
    Reader rank * workers + worker of ranks * workers owns what that rank's DataLoader worker
    owns (``ReaderSplit.part``); one process here plays each of them."""
    from beamtok import Dataset

    ds = Dataset.from_cache(cache) if isinstance(cache, str) else cache
    return ds.shard_by_rank(part, parts).batch(2)


def measure_open(cache: str, part: int, parts: int, workers: int) -> dict[str, Any]:
    """In a fresh process: imports, cache open, first batch; peak RSS."""
    start = time.perf_counter()
    import beamtok  # noqa: F401

    imported = time.perf_counter()
    rss_imported = peak_rss()
    ds = reader(cache, part, parts, workers)
    opened = time.perf_counter()
    it = ds.iter()
    batch = next(it)
    first = time.perf_counter()
    state = it.state_dict()
    return {
        "import_s": imported - start,
        "open_s": opened - imported,
        "first_batch_s": first - opened,
        "open_and_first_batch_s": first - imported,
        "peak_rss_bytes": peak_rss(),
        "rss_after_import_bytes": rss_imported,
        "state_bytes": len(json.dumps(state)),
        "rows": [int(s) for s in batch["shard"]],
    }


def mixed_readers(caches: list[str]) -> Any:
    """The mix of these caches (uneven weights 1..7, seed 0): ``make(part, parts)`` is reader
    ``part`` of ``parts`` splitting it by examples, taking batches of 2."""
    from beamtok import Dataset

    opened = [Dataset.from_cache(c) for c in caches]
    weights = [1.0 + (k % 7) for k in range(len(caches))]
    mix = Dataset.mix(opened, [w / sum(weights) for w in weights], seed=0)
    return lambda part, parts: mix.shard_by_rank(part, parts, split="examples").batch(2)


def measure_mix(caches: list[str], part: int, parts: int) -> dict[str, Any]:
    """In a fresh process: a mix of these caches, uneven weights, one reader's first batch:
    time, memory, what it opened and decoded, its state."""
    start = time.perf_counter()
    import beamtok  # noqa: F401

    imported = time.perf_counter()
    rss_imported = peak_rss()
    ds = mixed_readers(caches)(part, parts)
    built = time.perf_counter()
    it = ds.iter()
    batch = next(it)
    first = time.perf_counter()
    pool = it.source.rows[0].rows.pool
    opened, decoded = pool.files_opened, pool.groups_decoded
    state = it.state_dict()
    for _ in range(20):
        next(it)
    steady = (time.perf_counter() - first) / 20
    return {
        "import_s": imported - start,
        "open_s": built - imported,
        "first_batch_s": first - built,
        "open_and_first_batch_s": first - imported,
        "next_batches_s_each": steady,
        "peak_rss_bytes": peak_rss(),
        "rss_after_import_bytes": rss_imported,
        "shard_files_opened_for_first_batch": opened,
        "row_groups_decoded_for_first_batch": decoded,
        "state_bytes": len(json.dumps(state)),
        "mix_state_bytes": len(json.dumps(state["pipeline"]["upstream"]["upstream"])),
        "rows": [[int(s), int(sh)] for s, sh in zip(batch["source"], batch["shard"])],
    }


def mix_world_size_change(
    caches: list[str], old_parts: int, new_parts: int, steps: int, samples: list[int]
) -> dict[str, Any]:
    """In a fresh process: ``old_parts`` readers of the mix each took ``steps`` batches in
    step; new reader ``samples[k]`` of ``new_parts`` resumes from all their states (merge and
    first batch timed, memory read). One process cannot run 8,192 readers, so the old states
    are made from one old reader's real state with the position each reader would be at
    (seek a single reader there); the made states of a few readers are checked equal to their
    real ones. The resumed reader's first examples are checked against the one mixed stream."""
    import copy

    make = mixed_readers(caches)
    real = {}
    for part in (0, old_parts // 2 + 1, old_parts - 1):
        it = make(part, old_parts).iter()
        for _ in range(steps):
            next(it)
        real[part] = json.loads(json.dumps(it.state_dict()))
    walker = make(0, 1).iter().source  # one reader of the whole stream, moved by seeks
    template = real[0]

    def made(part: int) -> dict[str, Any]:
        seen = part + (steps * 2 - 1) * old_parts + 1  # one past the last example this reader kept
        walker.seek(seen - walker._index)
        state = copy.deepcopy(template)
        state["split"]["rank"] = part
        split_state = state["pipeline"]["upstream"]
        split_state["seen"] = seen
        mix_state = walker.state_dict()
        mix_state["stats"] = split_state["upstream"]["stats"]  # every reader handed out 2 x steps rows of 64 tokens
        split_state["upstream"] = mix_state
        return state

    def without_counts(
        state: dict[str, Any],
    ) -> dict[str, Any]:  # a reader's document counts depend on which rows it read
        state = copy.deepcopy(state)
        del state["pipeline"]["upstream"]["upstream"]["stats"]["documents"]
        return state

    states = []
    for part in range(old_parts):
        states.append(made(part))
        if part in real and without_counts(states[-1]) != without_counts(real[part]):
            diff = {k: (states[-1][k], real[part][k]) for k in real[part] if states[-1].get(k) != real[part][k]}
            raise SystemExit(f"made state of old reader {part} differs from its real state: {str(diff)[:1500]}")
    passed_bytes = sum(len(json.dumps(s)) for s in states)
    out: dict[str, Any] = {
        "old readers": old_parts,
        "new readers": new_parts,
        "batches per old reader": steps,
        "states passed, bytes": passed_bytes,
        "one old state, bytes": len(json.dumps(states[0])),
        "peak RSS holding every old state, before any new reader, bytes": peak_rss(),
    }
    taken = steps * 2 * old_parts  # examples the old readers took, in step: the new readers go on from there
    for part in samples:
        rss_before = peak_rss()
        start = time.perf_counter()
        it = make(part, new_parts).iter(states)
        batch = next(it)
        elapsed = time.perf_counter() - start
        whole = make(0, 1).iter().source
        whole.seek(taken + (part - taken) % new_parts)  # a new reader keeps the examples numbered part mod new_parts
        want = [next(whole)]
        whole.seek(new_parts - 1)
        want.append(next(whole))
        got = list(zip(batch["source"].tolist(), batch["shard"].tolist(), batch["index"].tolist()))
        if got != [(w["source"], w["shard"], w["index"]) for w in want]:
            raise SystemExit(
                f"new reader {part}: {got} is not the stream's {[(w['source'], w['shard'], w['index']) for w in want]}"
            )
        out[f"new reader {part}: merge of all old states and first batch, s"] = elapsed
        out[f"new reader {part}: peak RSS, bytes"] = max(rss_before, peak_rss())
    return out


def measure_shuffle(cache: str, part: int, parts: int, spread: int | None) -> dict[str, Any]:
    """In a fresh process: reader ``part`` of ``parts`` of the cache's global shuffle (spread
    windows of ``spread`` units of a row group, else the whole-cache permutation decoding row
    groups, no copy): open, first batch, what it decoded, its state."""
    start = time.perf_counter()
    from beamtok import Dataset

    imported = time.perf_counter()
    ds = (
        Dataset.from_cache(cache)
        .repeat()
        .global_shuffle(seed=0, spread=spread, unit_rows=ROWS if spread else None, local_copy=False)
    )
    it = ds.shard_by_rank(part, parts, split="examples").batch(2).iter()
    opened = time.perf_counter()
    batch = next(it)
    first = time.perf_counter()
    access = it.source.source.opened()
    decoded, files = access.groups_decoded, access.pool.files_opened
    for _ in range(20):
        next(it)
    steady = (time.perf_counter() - first) / 20
    state = it.state_dict()
    return {
        "import_s": imported - start,
        "open_s": opened - imported,
        "first_batch_s": first - opened,
        "next_batches_s_each": steady,
        "row_groups_decoded_for_first_batch": decoded,
        "shard_files_opened_for_first_batch": files,
        "row_groups_decoded_for_22_batches": access.groups_decoded,
        "peak_rss_bytes": peak_rss(),
        "state_bytes": len(json.dumps(state)),
        "rows": [[int(s), int(i)] for s, i in zip(batch["shard"], batch["index"])],
    }


def fresh(name: str, *args: Any) -> dict[str, Any]:
    return measured([sys.executable, __file__, "measure", name, json.dumps(args)], name, cwd=HERE)


# ------------------------------------------------------- the world-size change


def elastic(cache: str, ranks: int, new_ranks: int, workers: int, steps: int) -> dict[str, Any]:
    """Old readers take ``steps`` batches each; new readers resume from all their states and
    read to the end. Every row must be read exactly once."""
    from beamtok import Dataset

    seen: Counter[tuple[int, int]] = Counter()
    states = []
    start = time.perf_counter()
    opened = Dataset.from_cache(cache)  # one process plays every reader: the manifest is read once
    old_parts = ranks * workers
    for part in range(old_parts):
        it = reader(opened, part, old_parts, workers).iter()
        for _ in range(steps):
            batch = next(it, None)
            if batch is None:
                break
            seen.update(zip(batch["shard"].tolist(), batch["index"].tolist()))
        states.append(it.state_dict())
    saved = time.perf_counter()
    new_parts = new_ranks * workers
    merge_s = []
    for part in range(new_parts):
        t = time.perf_counter()
        it = reader(opened, part, new_parts, workers).iter(states)
        batch = next(it, None)  # the states are merged at the first next()
        merge_s.append(time.perf_counter() - t)
        while batch is not None:
            seen.update(zip(batch["shard"].tolist(), batch["index"].tolist()))
            batch = next(it, None)
    done = time.perf_counter()
    from beamtok._src.cache.read.reader import Cache

    shards = Cache(cache).manifest.shards
    expected = {(e.index, r) for e in shards for r in range(e.rows)}
    lost = len(expected - set(seen))
    repeated = sum(1 for k, n in seen.items() if n > 1)
    return {
        "old readers": old_parts,
        "new readers": new_parts,
        "batches per old reader before the change": steps,
        "rows": len(expected),
        "lost": lost,
        "repeated": repeated,
        "states passed, bytes": sum(len(json.dumps(s)) for s in states),
        "one old state, bytes (largest)": max(len(json.dumps(s)) for s in states),
        "old readers' steps and saves, s": saved - start,
        "new reader: merge of all old states and first batch, s (median)": float(np.median(merge_s)),
        "new reader: merge of all old states and first batch, s (max)": float(np.max(merge_s)),
        "new readers' reads, s": done - saved,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=100_000)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--sources", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--elastic-ranks", type=int, default=64, help="the world-size change is checked row by row at this scale"
    )
    parser.add_argument("--elastic-new-ranks", type=int, default=48)
    parser.add_argument(
        "--elastic-shards", type=int, default=10_000, help="shards of the cache the change is checked on"
    )
    parser.add_argument("--shards-per-source", type=int, default=10)
    parser.add_argument(
        "--mix-new-ranks", type=int, default=768, help="ranks after the mix's world-size change (x --workers readers)"
    )
    args = parser.parse_args()
    (cache,) = build_caches([WORK / f"internet-scale-{args.shards}"], args.shards)
    mix_root = WORK / f"internet-scale-mix-{args.sources}x{args.shards_per_source}"
    sources = build_caches([mix_root / f"source-{k:04d}" for k in range(args.sources)], args.shards_per_source)
    parts = args.ranks * args.workers
    samples = [0, parts // 2 + 3, parts - 1]
    opens = {f"reader {p} of {parts}": fresh("open", cache, p, parts, args.workers) for p in samples}
    baseline = fresh("imports")
    for name, figures in opens.items():
        print(
            f"  {name}: open {figures['open_s']:.2f} s, first batch {figures['first_batch_s']:.2f} s, peak RSS {figures['peak_rss_bytes'] / 2**20:.0f} MiB, state {figures['state_bytes']} B"
        )
    mix = {f"reader {p} of {parts}": fresh("mix", sources, p, parts) for p in (5, parts // 2 + 1, parts - 1)}
    for name, figures in mix.items():
        print(
            f"  mix of {args.sources}, {name}: open {figures['open_s']:.2f} s, first batch {figures['first_batch_s']:.2f} s "
            f"({figures['shard_files_opened_for_first_batch']} shard files opened), state {figures['state_bytes']} B "
            f"(mix {figures['mix_state_bytes']} B), peak RSS {figures['peak_rss_bytes'] / 2**20:.0f} MiB"
        )
    shuffles = {
        f"spread {parts} units of {ROWS} rows, reader {p} of {parts}": fresh("shuffle", cache, p, parts, parts)
        for p in (0, parts - 1)
    }
    shuffles[f"whole-cache permutation, decoding, reader 0 of {parts}"] = fresh("shuffle", cache, 0, parts, None)
    for name, figures in shuffles.items():
        print(
            f"  global shuffle, {name}: open {figures['open_s']:.2f} s, first batch {figures['first_batch_s']:.2f} s, "
            f"{figures['row_groups_decoded_for_22_batches']} row groups decoded for 22 batches of 2, state {figures['state_bytes']} B"
        )
    mix_change = fresh(
        "mix_change",
        sources,
        parts,
        args.mix_new_ranks * args.workers,
        args.steps,
        [3, args.mix_new_ranks * args.workers - 1],
    )
    print(
        f"  mix, {parts} -> {args.mix_new_ranks * args.workers} readers: "
        + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in mix_change.items())
    )
    (elastic_cache,) = build_caches([WORK / f"internet-scale-{args.elastic_shards}"], args.elastic_shards)
    change = elastic(elastic_cache, args.elastic_ranks, args.elastic_new_ranks, args.workers, args.steps)
    print(
        f"  {args.elastic_ranks} -> {args.elastic_new_ranks} ranks: {change['lost']} lost, {change['repeated']} repeated of {change['rows']} rows; new reader's merge and first batch {change['new reader: merge of all old states and first batch, s (median)']:.3f} s"
    )
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}",
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/internet_scale.py " + " ".join(sys.argv[1:]),
        "cache": {
            "shards": args.shards,
            "rows per shard": ROWS,
            "seq_len": SEQ,
            "manifest bytes": os.path.getsize(Path(cache) / "manifest.json"),
            "shard table bytes": os.path.getsize(Path(cache) / "shards.arrow")
            if (Path(cache) / "shards.arrow").exists()
            else 0,
        },
        "readers": {"ranks": args.ranks, "workers": args.workers, "readers": parts},
        "open and first batch, fresh process each": opens,
        "a process that only imported beamtok": baseline,
        "mix": {
            "sources": args.sources,
            "shards per source": args.shards_per_source,
            "split": "examples",
            "readers": mix,
        },
        "mix world-size change": {"sources": args.sources, **mix_change},
        "global shuffle of the cache, split by examples (positions)": shuffles,
        "world-size change": {
            "shards": args.elastic_shards,
            "from ranks": args.elastic_ranks,
            "to ranks": args.elastic_new_ranks,
            "workers": args.workers,
            **change,
        },
    }
    write_results(
        "internet_scale.json",
        results,
        "synthetic: Parquet shards of GPT-2 concat_chunk(64) rows written by the cache writer",
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "measure":
        name, params = sys.argv[2], json.loads(sys.argv[3])
        if name == "imports":
            import beamtok  # noqa: F401

            print(json.dumps({"peak_rss_bytes": peak_rss()}))
        else:
            measures = {
                "open": measure_open,
                "mix": measure_mix,
                "mix_change": mix_world_size_change,
                "shuffle": measure_shuffle,
            }
            print(json.dumps(measures[name](*params)))
    else:
        main()

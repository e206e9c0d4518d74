"""The benchmark suite: one command, ratios measured side by side, results as JSON.

    python benchmarks/run_all.py [--mb 40] [--repeats 3] [--skip-cache]

Builds a corpus of real text (the shipped documents, repeated) of at least ``--mb`` MB, as 8
shards and as one shard (plus its gzip twin), then runs every measurement in its own
subprocess, so thread settings and peak memory are clean. Throughput measurements run in
rounds (each once per round), and each ratio is the median over rounds of the two rates
measured in the same round, so a drift of the machine's speed affects both sides alike:

- on-the-fly tokens/s (files -> tokenize -> ensure_bos_eos -> concat_chunk(1024) -> batch(8))
  / raw ``encode_batch_fast`` tokens/s, on 1 core and on 2 (workers for us, Rayon threads for
  the raw tokenizer); the same with ``engine="exact"``;
- on-the-fly / epochraft's equivalent pipeline, epochraft on one and on two Rayon threads
  (skipped, with a message, without epochraft);
- resume time at 10/50/90% of the single shard, plain and gzip, for us and epochraft;
- state_dict size after 800 batches, with and without shuffle, for us and epochraft;
- Beam cache build (in-process, multi_processing x2) / raw tokenizer; cache read / plain
  pyarrow; cache read / on-the-fly (``benchmarks/cache.py``);
- peak RSS streaming the corpus once and ten times.

Prints a table and writes benchmarks/results/run_all.json (with the machine's description).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
RESULTS = HERE / "results"
TIMEOUT = 1800  # seconds one measurement may take


# ------------------------------------------------------------------ measurements


def texts_of(paths: list[str]) -> list[str]:
    return [json.loads(line)["text"] for p in paths for line in open(p, encoding="utf-8")]


def measure_raw(paths: list[str]) -> dict[str, Any]:
    from beamtok import load_tokenizer

    tok = load_tokenizer(TOKENIZER)
    texts = texts_of(paths)
    start = time.perf_counter()
    tokens = 0
    for lo in range(0, len(texts), 64):
        tokens += sum(len(e.ids) for e in tok.backend.encode_batch_fast(texts[lo : lo + 64], add_special_tokens=True))
    return {"tokens": tokens, "seconds": time.perf_counter() - start}


def ours(paths: list[str], workers: int, backend: str = "hf", shuffle: bool = False) -> Any:
    from beamtok import Dataset

    ds = (
        Dataset.from_files(paths)
        .tokenize(TOKENIZER, engine={"hf": "tokenizers", "tiktoken": "exact"}.get(backend, backend))
        .ensure_bos_eos()
        .concat_chunk(1024)
    )
    if workers:
        ds = ds.interleave(workers).parallel(workers)
    if shuffle:
        ds = ds.shuffle(window=1024, seed=0)
    return ds.batch(8)


def measure_ours(
    paths: list[str], workers: int, backend: str = "hf", epochs: int = 1, memory: bool = False
) -> dict[str, Any]:
    """Tokens per second of the pipeline; with ``memory``, also peak memory of the consumer and
    its workers (sampled on a thread that costs CPU: the throughput rows run without it)."""
    import contextlib

    from beamtok import Dataset

    ds = ours(paths, workers, backend)  # loads the tokenizer: outside the timing, as for raw
    if epochs > 1:
        ds = (
            Dataset.from_files(paths)
            .tokenize(TOKENIZER, engine={"hf": "tokenizers", "tiktoken": "exact"}.get(backend, backend))
            .ensure_bos_eos()
            .concat_chunk(1024)
            .repeat(epochs)
        )
        ds = (ds.interleave(workers).parallel(workers) if workers else ds).batch(8)
    from common import PeakTreeMemory, peak_rss

    sampler = PeakTreeMemory() if memory else None
    start = time.perf_counter()  # worker start-up and reading the files are timed
    tokens = 0
    with sampler or contextlib.nullcontext():
        for batch in ds:
            tokens += int((batch["segment_ids"] > 0).sum())
    seconds = time.perf_counter() - start
    found: dict[str, Any] = {"tokens": tokens, "seconds": seconds}
    if sampler is not None:
        found["peak_rss_mb"] = peak_rss() / 2**20  # the consumer alone
        found["peak_tree_pss_mb"] = sampler.peak_mb  # the consumer and its worker processes
        found["processes"] = sampler.processes
    return found


def epochraft_pipeline(paths: list[str], shuffle: bool = False) -> Any:
    from epochraft import CheckpointableDataset
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(TOKENIZER)
    ds = CheckpointableDataset.from_files(paths, repeat=False, shuffle_shards=False, n_active_shards=1, format="jsonl")
    ds = ds.tokenize(tok).ensure_bos_eos(tok).concat_chunk(1024)
    if shuffle:
        ds = ds.shuffle(buffer_size=1024)
    return ds.batch(8)


def measure_epochraft(paths: list[str]) -> dict[str, Any]:
    pipeline = epochraft_pipeline(paths)  # loads the tokenizer: outside the timing, as for raw
    start = time.perf_counter()
    tokens = 0
    for batch in pipeline:
        tokens += int(batch["input_ids"].numel())
    return {"tokens": tokens, "seconds": time.perf_counter() - start}


# epochraft's iterators can deadlock in their finalizer when dropped mid-stream, so every
# iterator a measurement opens is kept alive until the process ends with os._exit.
KEEP_ALIVE: list[Any] = []


RESUME_POINTS = 7  # states per position, spread over 2% of the stream


def measure_resume(path: str, which: str, repeats: int) -> dict[str, Any]:
    """Time to the first batch after restoring a state taken at 10, 50 and 90% of the shard.

    Resuming re-tokenizes the one document the cursor lands in, so a single state measures
    that document's size as much as the position; each position is therefore the median over
    RESUME_POINTS states spread over 2% of the stream (all taken in one pass).
    """

    def make() -> Any:
        it = ours([path], 0).iter() if which == "ours" else epochraft_pipeline([path]).iter()
        KEEP_ALIVE.append(it)
        return it

    total = sum(1 for _ in make())
    step = max(1, total // (50 * RESUME_POINTS))
    marks = {total * pct // 100 + k * step: pct for pct in (10, 50, 90) for k in range(RESUME_POINTS)}
    states: dict[int, list[Any]] = {10: [], 50: [], 90: []}
    it = make()
    for consumed in range(max(marks) + 1):
        if consumed in marks:
            state = it.state_dict()
            states[marks[consumed]].append(json.loads(json.dumps(state)) if which == "ours" else state)
        next(it)

    def resume(s: Any) -> float:
        # the pipeline (and so the tokenizer) is built before the clock starts, for both tools:
        # ours is cached in-process after the first load, epochraft's is loaded afresh each time
        pipeline = ours([path], 0) if which == "ours" else epochraft_pipeline([path])
        start = time.perf_counter()
        it = pipeline.iter(s)
        KEEP_ALIVE.append(it)
        next(it)
        return time.perf_counter() - start

    out: dict[str, Any] = {"batches": total, "states_per_position": RESUME_POINTS}
    for pct, taken in states.items():
        out[f"{pct}%"] = statistics.median(statistics.median(resume(s) for _ in range(repeats)) for s in taken)
    out["ratio_90_to_10"] = out["90%"] / out["10%"]
    return out


def measure_state(paths: list[str], which: str, shuffle: bool) -> dict[str, Any]:
    it = (ours(paths, 0, shuffle=shuffle) if which == "ours" else epochraft_pipeline(paths, shuffle=shuffle)).iter()
    KEEP_ALIVE.append(it)
    for _ in itertools.islice(it, 800):
        pass
    state = it.state_dict()
    size = len(json.dumps(state)) if which == "ours" else len(pickle.dumps(state))
    return {"bytes": size, "format": "json" if which == "ours" else "pickle"}


MEASURES = {
    "raw": measure_raw,
    "ours": measure_ours,
    "epochraft": measure_epochraft,
    "resume": measure_resume,
    "state": measure_state,
}


# ------------------------------------------------------------------- orchestration


def run(name: str, *args: Any, threads: int = 1) -> dict[str, Any] | None:
    """Run one measurement in a fresh interpreter; None (with a message) if it fails."""
    env = {
        **os.environ,
        "RAYON_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "true" if threads > 1 else "false",
    }
    cmd = [sys.executable, __file__, "measure", name, json.dumps(args)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        print(f"  ({name} {args[1:] if len(args) > 1 else ''} skipped: no result within {TIMEOUT} s)", file=sys.stderr)
        return None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        print(f"  ({name} {args[1:] if len(args) > 1 else ''} skipped: {last})", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def rounds_of(
    measurements: dict[str, tuple[str, tuple[Any, ...], int]], repeats: int
) -> dict[str, list[dict[str, Any]]]:
    """Run every measurement once per round, ``repeats`` rounds: slow drift of this VM's speed
    then affects all of them alike, and ratios can be paired within a round."""
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in measurements}
    for _ in range(repeats):
        for key, (name, margs, threads) in measurements.items():
            result = run(name, *margs, threads=threads)
            if result is not None:
                runs[key].append({**result, "tokens_per_s": result["tokens"] / result["seconds"]})
    return runs


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2] if runs else None


def paired_ratio(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> float | None:
    """Median over rounds of a's rate / b's rate in the same round."""
    pairs = [x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(a, b)]
    return statistics.median(pairs) if pairs else None


def memory_runs(shards: list[str]) -> dict[str, Any]:
    """Peak memory streaming the corpus once and ten times with 2 workers: the consumer's
    RSS, and the PSS of the consumer with its workers."""
    one = run("ours", shards, 2, "hf", 1, True)
    ten = run("ours", shards, 2, "hf", 10, True)
    if not (one and ten):
        return {}
    for name, found in (("1x", one), ("10x", ten)):
        print(
            f"  peak memory, corpus {name}: consumer RSS {found['peak_rss_mb']:.0f} MB, consumer + workers PSS {found['peak_tree_pss_mb']:.0f} MB ({found['processes']} processes)"
        )
    return {
        "peak_rss_mb": {"1x corpus": one["peak_rss_mb"], "10x corpus": ten["peak_rss_mb"]},
        "peak_tree_pss_mb": {"1x corpus": one["peak_tree_pss_mb"], "10x corpus": ten["peak_tree_pss_mb"]},
        "processes": one["processes"],
        "peak_ratios": {
            "peak RSS 10x / 1x": ten["peak_rss_mb"] / one["peak_rss_mb"],
            "peak PSS with workers 10x / 1x": ten["peak_tree_pss_mb"] / one["peak_tree_pss_mb"],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="beamtok benchmark suite")
    parser.add_argument("--mb", type=float, default=40.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-cache", action="store_true", help="leave out benchmarks/cache.py")
    parser.add_argument("--state-only", action="store_true", help="only the state sizes (writes results/state.json)")
    parser.add_argument(
        "--memory-only", action="store_true", help="only the peak memory runs (writes results/memory.json)"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import build_jsonl, build_shards, machine_line, write_results

    shards = build_shards("suite", args.mb, 8)
    if args.state_only:
        sizes = {
            f"{who}, shuffle={s}": run("state", shards, who, s) for who in ("ours", "epochraft") for s in (False, True)
        }
        found = {k: v["bytes"] for k, v in sizes.items() if v is not None}
        for name, size in found.items():
            print(f"  state {name:<28} {size:>12,} bytes")
        RESULTS.mkdir(exist_ok=True)
        record = {
            "date": time.strftime("%Y-%m-%d"),
            "command": f"python benchmarks/run_all.py --mb {args.mb:g} --state-only",
            "state_bytes_after_800_batches": found,
        }
        (RESULTS / "state.json").write_text(json.dumps(record, indent=2) + "\n")
        return
    if args.memory_only:
        record = {
            "date": time.strftime("%Y-%m-%d"),
            "command": f"python benchmarks/run_all.py --mb {args.mb:g} --memory-only",
        }
        record.update(memory_runs(shards))
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "memory.json").write_text(json.dumps(record, indent=2) + "\n")
        return
    single = str(build_jsonl("suite-single", int(args.mb * 1e6), gzip_too=True))
    results: dict[str, Any] = {
        "machine": machine_line(),
        "corpus_mb": sum(os.path.getsize(p) for p in shards) / 1e6,
        "date": time.strftime("%Y-%m-%d"),
    }
    r = args.repeats
    measurements = {
        "raw encode_batch_fast, 1 thread": ("raw", (shards,), 1),
        "raw encode_batch_fast, 2 threads": ("raw", (shards,), 2),
        "on-the-fly, in-process (1 core)": ("ours", (shards, 0), 1),
        "on-the-fly, 2 workers": ("ours", (shards, 2), 1),
        "on-the-fly tiktoken, in-process (1 core)": ("ours", (shards, 0, "tiktoken"), 1),
        "on-the-fly tiktoken, 2 workers": ("ours", (shards, 2, "tiktoken"), 1),
        "epochraft (1 thread)": ("epochraft", (shards,), 1),
        "epochraft (2 Rayon threads)": ("epochraft", (shards,), 2),
    }
    runs = rounds_of(measurements, r)
    results["throughput"] = {k: m for k, m in ((k, median_run(v)) for k, v in runs.items()) if m is not None}

    def ratio(a: str, b: str) -> float | None:
        return paired_ratio(runs[a], runs[b])

    ratios = {
        "on-the-fly / raw tokenizer, 1 core": ratio(
            "on-the-fly, in-process (1 core)", "raw encode_batch_fast, 1 thread"
        ),
        "on-the-fly / raw tokenizer, 2 cores": ratio("on-the-fly, 2 workers", "raw encode_batch_fast, 2 threads"),
        "on-the-fly (2 workers) / epochraft (1 thread)": ratio("on-the-fly, 2 workers", "epochraft (1 thread)"),
        "on-the-fly (2 workers) / epochraft (2 Rayon threads)": ratio(
            "on-the-fly, 2 workers", "epochraft (2 Rayon threads)"
        ),
        "on-the-fly (1 core) / epochraft (1 thread)": ratio("on-the-fly, in-process (1 core)", "epochraft (1 thread)"),
        "tiktoken on-the-fly / raw tokenizer, 1 core": ratio(
            "on-the-fly tiktoken, in-process (1 core)", "raw encode_batch_fast, 1 thread"
        ),
        "tiktoken on-the-fly (2 workers) / epochraft (1 thread)": ratio(
            "on-the-fly tiktoken, 2 workers", "epochraft (1 thread)"
        ),
    }
    resume = {
        f"{who} {kind}": run("resume", path, who, r)
        for who in ("ours", "epochraft")
        for kind, path in (("jsonl", single), ("jsonl.gz", single + ".gz"))
    }
    results["resume_seconds"] = {k: v for k, v in resume.items() if v is not None}
    state = {
        f"{who}, shuffle={s}": run("state", shards, who, s) for who in ("ours", "epochraft") for s in (False, True)
    }
    results["state_bytes_after_800_batches"] = {k: v["bytes"] for k, v in state.items() if v is not None}
    memory = memory_runs(shards)
    results.update(memory)
    if "peak_ratios" in memory:
        ratios.update(memory["peak_ratios"])
    results["ratios"] = {k: v for k, v in ratios.items() if v is not None}
    if not args.skip_cache:
        subprocess.run([sys.executable, "cache.py", "--mb", str(args.mb), "--repeats", str(r)], cwd=HERE, check=True)
    if (RESULTS / "cache.json").exists():  # with --skip-cache: the last cache.py run's figures
        results["cache"] = json.loads((RESULTS / "cache.json").read_text())["ratios"]
        results["cache_from"] = "this run" if not args.skip_cache else "benchmarks/results/cache.json of an earlier run"

    print(f"\n{results['machine']}; corpus {results['corpus_mb']:.1f} MB")
    for name, v in results["throughput"].items():
        print(f"  {name:<44} {v['tokens_per_s'] / 1e6:7.2f} M tokens/s")
    for name, value in {**results["ratios"], **results.get("cache", {})}.items():
        print(f"  {name:<52} {value:7.2f}x")
    for name, v in results["resume_seconds"].items():
        print(
            f"  resume {name:<22} 10%: {v['10%']:.3f}s  50%: {v['50%']:.3f}s  90%: {v['90%']:.3f}s  (90/10 = {v['ratio_90_to_10']:.2f})"
        )
    for name, size in results["state_bytes_after_800_batches"].items():
        print(f"  state {name:<28} {size:>12,} bytes")
    for name, mb in results.get("peak_rss_mb", {}).items():
        print(f"  peak RSS {name:<16} {mb:8.1f} MB")
    write_results("run_all.json", results)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "measure":
        print(json.dumps(MEASURES[sys.argv[2]](*json.loads(sys.argv[3]))), flush=True)
        os._exit(0)  # skip finalizers (see KEEP_ALIVE)
    else:
        main()

"""What building a cache costs against streaming the same files: CPU per token, one core.

    python benchmarks/build_cost.py [--mb 40] [--rounds 3] [--corpus prose]

Each measurement runs in its own interpreter pinned to one core (``sched_setaffinity``), once
per round, in turns:

- **stream**: ``from_files(...).tokenize(gpt2).ensure_bos_eos().concat_chunk(1024).batch(8)``,
  iterated to the end;
- **build**: the same per-shard stages' ``cache(directory)`` on Beam's in-process runner, which
  tokenizes, packs and writes every shard's Parquet file, its record and the manifest.

CPU is user + system time of the process and its children (``getrusage``). *Start-up* is what
a process spends before the work call (imports, the tokenizer and its fast path, Beam's
pipeline construction is inside the work call); *work* is the call itself. The ratios are
build / stream, CPU per token of the work, paired within each round (median and range over
rounds), and the same with start-up included. Writes benchmarks/results/build_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
WORK = ROOT / "build" / "bench-build-cost"
SEQ_LEN = 1024


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(kind: str, paths: list[str], output: str) -> dict[str, Any]:
    """One measurement in this process, pinned to one core."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from beamtok import Dataset, load_tokenizer

    load_tokenizer(TOKENIZER).fast_path()  # the engine's build is start-up in both
    ds = Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(SEQ_LEN)
    if kind == "build":
        import apache_beam  # noqa: F401  (the runner's import is start-up)
    started_cpu, started = cpu_seconds(), time.perf_counter()
    if kind == "stream":
        tokens = 0
        for batch in ds.batch(8).iter():
            tokens += int((batch["segment_ids"] > 0).sum())
    else:
        cached = ds.cache(output, progress=False)
        tokens = int(cached.pipeline.root.origin.cache.manifest.totals["tokens"])
    work_cpu, wall = cpu_seconds() - started_cpu, time.perf_counter() - started
    return {"tokens": tokens, "startup_cpu_s": started_cpu, "work_cpu_s": work_cpu, "work_wall_s": wall}


def run(kind: str, paths: list[str], output: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "measure", json.dumps([kind, paths, output])]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=HERE)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["work_ns_per_token"] = result["work_cpu_s"] / result["tokens"] * 1e9
    result["all_ns_per_token"] = (result["work_cpu_s"] + result["startup_cpu_s"]) / result["tokens"] * 1e9
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=40.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", default="prose", choices=("prose", "code"))
    parser.add_argument("--out", default="build_cost.json")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import PROSE, build_shards, write_results

    paths = build_shards("build-cost", args.mb, 8, args.corpus)
    runs: dict[str, list[dict[str, Any]]] = {"stream": [], "build": []}
    for r in range(args.rounds):
        order = ("stream", "build") if r % 2 == 0 else ("build", "stream")  # neither always first
        for kind in order:
            output = WORK / f"cache-{r}"
            shutil.rmtree(output, ignore_errors=True)
            runs[kind].append(run(kind, paths, str(output)))
            shutil.rmtree(output, ignore_errors=True)
        if runs["stream"][-1]["tokens"] != runs["build"][-1]["tokens"]:
            raise SystemExit(f"round {r}: the build holds {runs['build'][-1]['tokens']} tokens, the stream gave {runs['stream'][-1]['tokens']}")
        print(f"round {r}: " + ", ".join(f"{k} {v[-1]['work_ns_per_token']:.1f} ns/token (+{v[-1]['startup_cpu_s']:.2f} s start-up)" for k, v in runs.items()), flush=True)

    def ratios(key: str) -> dict[str, float]:
        values = [b[key] / s[key] for s, b in zip(runs["stream"], runs["build"])]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    results = {
        "corpus_mb": sum(os.path.getsize(p) for p in paths) / 1e6,
        "tokens": runs["stream"][0]["tokens"],
        "pinned": "one core (sched_setaffinity), each measurement in its own interpreter, kinds alternating first",
        "ns_per_token_work": {k: statistics.median(x["work_ns_per_token"] for x in v) for k, v in runs.items()},
        "startup_cpu_s": {k: statistics.median(x["startup_cpu_s"] for x in v) for k, v in runs.items()},
        "ratios": {
            "build / stream, CPU per token of the work": ratios("work_ns_per_token"),
            "build / stream, CPU per token with start-up": ratios("all_ns_per_token"),
        },
        "runs": runs,
    }
    for name, value in results["ratios"].items():
        print(f"  {name:<48} {value['median']:.2f}x ({value['min']:.2f}-{value['max']:.2f})")
    corpus = PROSE if args.corpus == "prose" else "source code and package documentation of this machine (benchmarks/common.py)"
    write_results(args.out, results, corpus=corpus)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "measure":
        print(json.dumps(measure(*json.loads(sys.argv[2]))), flush=True)
    else:
        main()

"""What building a cache costs against streaming the same files: CPU per token, one core.

    python benchmarks/build_cost.py [--mb 40] [--rounds 3] [--corpus prose]

Each measurement runs in its own interpreter pinned to one core (``sched_setaffinity``), once
per round, in turns:

- **stream**: ``from_files(...).tokenize(gpt2).ensure_bos_eos().concat_chunk(1024).batch(8)``,
  iterated to the end;
- **build**: the same per-shard stages' ``cache(directory)`` on Beam's in-process runner, which
  tokenizes, packs and writes every shard's Parquet file, its record and the manifest.

CPU is user + system time of the process and its children (``getrusage``). *Start-up* is what
a process spends before the work call (imports, the tokenizer and its fast path); *work* is
the call itself, Beam's pipeline construction and runner included. Each round also runs both
over one small file (``--small-mb``): the build's work there is mostly a fixed cost (the
pipeline built and planned, the runner's bundles, the manifest), the same for any corpus. So
the ratios, build / stream paired within each round (median and range over rounds), are:

- **per token**: the work's CPU per token past the small run's, ``(work - work_small) /
  (tokens - tokens_small)``: what a token costs, the fixed cost apart;
- **whole work**: CPU per token of the work, fixed cost included (falls as the corpus grows);
- **with start-up**: the same with each process's start-up added.

The fixed cost (build's small work less the stream's) is reported in seconds beside them.
Writes benchmarks/results/build_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
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

    _ = load_tokenizer(TOKENIZER).engine_choice  # the engine's build is start-up in both
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
    from common import measured

    result = measured([sys.executable, __file__, "measure", json.dumps([kind, paths, output])], kind, cwd=HERE)
    result["work_ns_per_token"] = result["work_cpu_s"] / result["tokens"] * 1e9
    result["all_ns_per_token"] = (result["work_cpu_s"] + result["startup_cpu_s"]) / result["tokens"] * 1e9
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=40.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small-mb", type=float, default=0.2, help="the small run's corpus, one file")
    parser.add_argument("--corpus", default="prose", choices=("prose", "code"))
    parser.add_argument("--out", default="build_cost.json")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import PROSE, build_shards, write_results

    paths = build_shards("build-cost", args.mb, 8, args.corpus)
    small = build_shards("build-cost-small", args.small_mb, 1, args.corpus)
    runs: dict[str, list[dict[str, Any]]] = {"stream": [], "build": [], "stream_small": [], "build_small": []}
    for r in range(args.rounds):
        order = ("stream", "build") if r % 2 == 0 else ("build", "stream")  # neither always first
        for kind in (*order, *(f"{k}_small" for k in order)):
            output = WORK / f"cache-{r}"
            shutil.rmtree(output, ignore_errors=True)
            runs[kind].append(
                run(kind.removesuffix("_small"), small if kind.endswith("_small") else paths, str(output))
            )
            shutil.rmtree(output, ignore_errors=True)
        for size in ("", "_small"):
            if runs[f"stream{size}"][-1]["tokens"] != runs[f"build{size}"][-1]["tokens"]:
                raise SystemExit(
                    f"round {r}: the build{size} holds {runs[f'build{size}'][-1]['tokens']} tokens, the stream gave {runs[f'stream{size}'][-1]['tokens']}"
                )
        for kind in ("stream", "build"):
            big, little = runs[kind][-1], runs[f"{kind}_small"][-1]
            big["marginal_ns_per_token"] = (
                (big["work_cpu_s"] - little["work_cpu_s"]) / (big["tokens"] - little["tokens"]) * 1e9
            )
        print(
            f"round {r}: "
            + ", ".join(
                f"{k} {runs[k][-1]['marginal_ns_per_token']:.1f} ns/token past a fixed {runs[k + '_small'][-1]['work_cpu_s']:.2f} s"
                for k in ("stream", "build")
            ),
            flush=True,
        )

    def ratios(key: str) -> dict[str, float]:
        values = [b[key] / s[key] for s, b in zip(runs["stream"], runs["build"])]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    fixed = [b["work_cpu_s"] - s["work_cpu_s"] for s, b in zip(runs["stream_small"], runs["build_small"])]

    results = {
        "corpus_mb": sum(os.path.getsize(p) for p in paths) / 1e6,
        "tokens": runs["stream"][0]["tokens"],
        "pinned": "one core (sched_setaffinity), each measurement in its own interpreter, kinds alternating first",
        "small_tokens": runs["stream_small"][0]["tokens"],
        "ns_per_token_marginal": {
            k: statistics.median(x["marginal_ns_per_token"] for x in runs[k]) for k in ("stream", "build")
        },
        "ns_per_token_work": {k: statistics.median(x["work_ns_per_token"] for x in v) for k, v in runs.items()},
        "startup_cpu_s": {k: statistics.median(x["startup_cpu_s"] for x in v) for k, v in runs.items()},
        "build_fixed_cpu_s": {"median": statistics.median(fixed), "min": min(fixed), "max": max(fixed)},
        "ratios": {
            "build / stream, CPU per token past the fixed cost": ratios("marginal_ns_per_token"),
            "build / stream, CPU per token of the whole work": ratios("work_ns_per_token"),
            "build / stream, CPU per token with start-up": ratios("all_ns_per_token"),
        },
        "runs": runs,
    }
    for name, value in results["ratios"].items():
        print(f"  {name:<52} {value['median']:.2f}x ({value['min']:.2f}-{value['max']:.2f})")
    print(f"  the build's fixed cost                               {results['build_fixed_cpu_s']['median']:.2f} s")
    corpus = (
        PROSE
        if args.corpus == "prose"
        else "source code and package documentation of this machine (benchmarks/common.py)"
    )
    write_results(args.out, results, corpus=corpus)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "measure":
        print(json.dumps(measure(*json.loads(sys.argv[2]))), flush=True)
    else:
        main()

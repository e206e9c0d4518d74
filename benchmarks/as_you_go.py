"""Caching as you go: what the background writer costs the stream, and what epoch 2 gains.

    python benchmarks/as_you_go.py [--mb 10] [--repeats 3]

On real-text shards (files -> tokenize -> ensure_bos_eos -> concat_chunk(1024) -> batch(8),
the default engine), each measurement in its own interpreter, once per round:

- on the fly, no caching (the baseline);
- ``cache_as_you_go`` into a fresh directory: epoch 1, tokenizing while the writer runs;
- the same dataset again: epoch 2, every shard read from the cache it wrote.

Ratios are medians over rounds of rates measured in the same round. Writes
benchmarks/results/as_you_go.json.
"""

from __future__ import annotations

import argparse
import json
import os
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
WORK = ROOT / "build" / "bench-as-you-go"


def stream(paths: list[str], cache_dir: str | None) -> dict[str, Any]:
    from beamtok import Dataset

    ds = Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(1024)
    if cache_dir is not None:
        ds = ds.cache_as_you_go(cache_dir)
    it = ds.batch(8).iter()
    start = time.perf_counter()
    tokens = 0
    for batch in it:
        tokens += int((batch["segment_ids"] > 0).sum())
    seconds = time.perf_counter() - start
    if cache_dir is not None:
        it.source.backend.wait()  # outside the timing: the last shard's file lands after its last example
    return {"tokens": tokens, "seconds": seconds}


def run(*args: Any) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "measure", json.dumps(args)], capture_output=True, text=True, cwd=HERE, check=True
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**result, "tokens_per_s": result["tokens"] / result["seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import build_shards, machine_line, write_results

    shards = build_shards("as-you-go", args.mb, 8)
    runs: dict[str, list[dict[str, Any]]] = {"on the fly": [], "caching, epoch 1": [], "cached, epoch 2": []}
    for r in range(args.repeats):
        directory = WORK / f"round-{r}"
        shutil.rmtree(directory, ignore_errors=True)
        runs["on the fly"].append(run(shards, None))
        runs["caching, epoch 1"].append(run(shards, str(directory)))
        runs["cached, epoch 2"].append(run(shards, str(directory)))
        if not (directory / "manifest.json").exists():
            raise SystemExit(f"{directory}: epoch 1 left no complete cache")

    def ratio(a: str, b: str) -> float:
        return statistics.median(x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(runs[a], runs[b]))

    results = {
        "machine": machine_line(),
        "corpus_mb": sum(os.path.getsize(p) for p in shards) / 1e6,
        "date": time.strftime("%Y-%m-%d"),
        "command": f"python benchmarks/as_you_go.py --mb {args.mb:g} --repeats {args.repeats}",
        "tokens_per_s": {k: statistics.median(x["tokens_per_s"] for x in v) for k, v in runs.items()},
        "ratios": {
            "epoch 1 while caching / on the fly without": ratio("caching, epoch 1", "on the fly"),
            "epoch 2 from the cache / epoch 1 while caching": ratio("cached, epoch 2", "caching, epoch 1"),
        },
        "runs": runs,
    }
    for key, rate in results["tokens_per_s"].items():
        print(f"  {key:<20} {rate / 1e6:7.2f} M tokens/s")
    for key, value in results["ratios"].items():
        print(f"  {key:<48} {value:7.2f}x")
    write_results("as_you_go.json", results)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "measure":
        print(json.dumps(stream(*json.loads(sys.argv[2]))), flush=True)
    else:
        main()

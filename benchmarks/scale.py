"""Reading at scale: mixing overhead and global-shuffle reads, as ratios paired in rounds.

    python benchmarks/scale.py [--mb 24] [--shards 8] [--repeats 3]

Builds two caches of real text (the shipped documents, repeated; packed rows of 1024 tokens,
row groups of 32 rows) and times, once per round each:
- (once) the JSON size of states in a mix of 3 sources over 64 ranks, and merged onto 48;
- reading cache A sequentially, and cache A mixed 50/50 with cache B (``Dataset.mix``): the
  ratio is the mixing overhead;
- reading cache A sequentially, and in a global shuffle with windows of 1024 rows and over
  the whole cache: the ratios are the cost of random access. Cache A fits the reader's
  decode budget (each row group decoded once); the whole-cache shuffle is timed again with
  the budget cut to 1/8 of the cache, as a cache larger than memory reads.
Each ratio is the median over rounds of the two rates measured in the same round.
Prints a table and writes benchmarks/results/scale.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import platform
import shutil
import statistics
import time
from collections.abc import Callable
from typing import Any

from beamtok import Dataset
from beamtok._src.cache import Cache
from beamtok._src.cache.read import random_access

from common import ROOT, WORK, build_shards, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


def build_cache(name: str, paths: list[str]) -> Dataset:
    out = WORK / name
    shutil.rmtree(out, ignore_errors=True)
    ds = Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(1024)
    return ds.cache(str(out), row_group_rows=32)


def rate(make: Callable[[], Dataset], rows: int | None = None) -> float:
    """Rows per second over one pass (``rows`` of them, or all)."""
    it = make().iter()
    start = time.perf_counter()
    n = 0
    for _ in it:
        n += 1
        if rows is not None and n >= rows:
            break
    return n / (time.perf_counter() - start)


def small_budget(measure: Callable[[], float], budget: int) -> float:
    saved = random_access.DECODE_BUDGET
    random_access.DECODE_BUDGET = budget
    try:
        return measure()
    finally:
        random_access.DECODE_BUDGET = saved


def state_sizes(*sources: Dataset) -> dict[str, int]:
    """JSON bytes of a reader's state in a mix of 3 sources (2 cached, 1 on the fly) split by
    examples over 64 ranks, and of a new rank's state merged from all 64 on 48 ranks."""

    def mix() -> Dataset:
        return Dataset.mix(list(sources), [0.5, 0.3, 0.2], seed=0).batch(2)

    states = []
    for rank in range(64):
        it = mix().shard_by_rank(rank, 64, split="examples").iter()
        next(it)
        states.append(it.state_dict())
    merged = mix().shard_by_rank(0, 48, split="examples").iter(states).state_dict()
    return {
        "one reader of 64, 3 sources": max(len(json.dumps(s)) for s in states),
        "all 64 readers' states (what is passed)": sum(len(json.dumps(s)) for s in states),
        "new reader of 48, merged from 64": len(json.dumps(merged)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=24.0)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    paths = build_shards("scale-bench", args.mb, args.shards)
    half = len(paths) // 2
    a, b = build_cache("scale-a", paths[:half]), build_cache("scale-b", paths[half:])
    rows_a = Cache(str(WORK / "scale-a")).manifest.totals["rows"]
    decoded_bytes = rows_a * (1024 * 13 + random_access.ROW_OVERHEAD)  # 3 int32 + 1 int8 columns a row
    measures: dict[str, Callable[[], float]] = {
        "cache A, sequential": lambda: rate(lambda: a),
        "cache A + B mixed 50/50": lambda: rate(lambda: Dataset.mix([a, b], [0.5, 0.5], stop="never"), rows_a),
        "cache A, global shuffle, window 1024 rows": lambda: rate(lambda: a.global_shuffle(seed=0, window=1024)),
        "cache A, global shuffle, whole cache": lambda: rate(lambda: a.global_shuffle(seed=0)),
        "cache A, global shuffle, whole cache, budget 1/8 of it": lambda: small_budget(
            lambda: rate(lambda: a.global_shuffle(seed=0)), decoded_bytes // 8
        ),
    }
    per_round: dict[str, list[float]] = {k: [] for k in measures}
    for _ in range(args.repeats):
        for name, measure in measures.items():
            per_round[name].append(measure())
    base = per_round["cache A, sequential"]

    def paired(name: str) -> float:
        return statistics.median(x / y for x, y in zip(per_round[name], base))

    ratios = {
        "mix of two caches / one cache": paired("cache A + B mixed 50/50"),
        "global shuffle, window 1024 rows / sequential": paired("cache A, global shuffle, window 1024 rows"),
        "global shuffle, whole cache / sequential": paired("cache A, global shuffle, whole cache"),
        "global shuffle, whole cache, budget 1/8 / sequential": paired(
            "cache A, global shuffle, whole cache, budget 1/8 of it"
        ),
    }
    results_state = state_sizes(
        a, b, Dataset.from_files(paths[:1]).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(1024)
    )
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}",
        "corpus_mb": sum(os.path.getsize(p) for p in paths) / 1e6,
        "rows_per_cache": rows_a,
        "seq_len": 1024,
        "row_group_rows": 32,
        "rows_per_second": {k: statistics.median(v) for k, v in per_round.items()},
        "rounds": per_round,
        "ratios": ratios,
        "state_bytes": results_state,
    }
    for name, values in per_round.items():
        print(f"  {name:<44} {statistics.median(values):10.0f} rows/s")
    for name, ratio in ratios.items():
        print(f"  {name:<48} {ratio:6.2f}x")
    for name, size in results["state_bytes"].items():
        print(f"  state bytes, {name:<42} {size:8d}")
    write_results("scale.json", results)


if __name__ == "__main__":
    main()

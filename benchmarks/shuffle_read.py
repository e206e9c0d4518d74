"""Global shuffle against a sequential read, on a cache larger than a reader's decode budget.

    python benchmarks/shuffle_read.py [--mb 40] [--seq-len 512] [--repeats 3]

Builds one JSONL file of real text (the shipped prose, repeated) and its cache with default
options (GPT-2, ``concat_chunk(seq_len)``; row groups of the default 8 MB of tokens), then sets
the decode budget to 1/1, 1/8 and 1/64 of the decoded cache and times, in rounds (each rate
once per round; ratios are medians of same-round pairs):
- a sequential read of the cache (``batch(16)``): the baseline;
- the global shuffle over the whole cache decoding row groups in memory (``local_copy=False``;
  timed over at most ``--decode-seconds`` once it thrashes);
- the global shuffle reading the local memory-mapped copy (``local_copy=DIR``), the copy made
  beforehand, and the time to make the copy (one sequential pass and a write), with the
  first epoch's rate counting the copy;
- the locality-aware option (``window``: the rows of as many row groups as the budget holds) decoding in memory,
  with two quality figures beside the full shuffle's: the share of consecutive rows from the
  same row group, and the correlation of output position with cache row.
Writes benchmarks/results/shuffle_read.json with date, command, corpus and cores.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import platform
import shutil
import statistics
import sys
import time
from typing import Any

import numpy as np

from beamtok import Dataset
from beamtok.cache.read import random_access
from beamtok.cache.read.local_rows import local_rows
from beamtok.cache.read.reader import Cache
from beamtok.cache.read.shuffle_rows import decoded_bytes

from common import ROOT, WORK, build_jsonl, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


def tokens_per_s(ds: Dataset, seconds: float | None = None) -> tuple[float, int]:
    """Real tokens per second over one pass (or over ``seconds``), and rows read."""
    start = time.perf_counter()
    tokens = rows = 0
    for batch in ds:
        tokens += int(np.count_nonzero(batch["segment_ids"]))
        rows += len(batch["segment_ids"])
        if seconds is not None and time.perf_counter() - start > seconds:
            break
    return tokens / (time.perf_counter() - start), rows


def quality(cache: str, rows: int, group_rows: int, window: int | None) -> dict[str, float]:
    """How far the order is from the cache's: consecutive rows in one row group, and the
    correlation of output position with cache row (0: no trace of the cache's order)."""
    from beamtok.stream.global_shuffle import GlobalOrder

    order = GlobalOrder(rows, seed=0, epoch=0, window=window).rows_at(np.arange(rows, dtype=np.int64))
    same_group = float(np.mean(order[1:] // group_rows == order[:-1] // group_rows))
    return {"consecutive rows from one row group": same_group, "position/row correlation": float(np.corrcoef(np.arange(rows), order)[0, 1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=40.0)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--decode-seconds", type=float, default=8.0)
    args = parser.parse_args()
    text = build_jsonl(f"shuffle-read-{args.mb:g}mb", int(args.mb * 1e6))
    cache_dir = WORK / f"shuffle-read-{args.mb:g}mb-{args.seq_len}"
    if not (cache_dir / "manifest.json").exists():
        shutil.rmtree(cache_dir, ignore_errors=True)
        Dataset.from_files([str(text)]).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(args.seq_len).cache(str(cache_dir))
    cache = Cache(str(cache_dir))
    totals = cache.manifest.totals
    decoded = decoded_bytes(cache)
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(cache.storage.path(cache.manifest.shards[0].file)).metadata
    group_rows = meta.row_group(0).num_rows
    copies = WORK / "shuffle-read-copies"
    shutil.rmtree(copies, ignore_errors=True)
    build_seconds = []
    for _ in range(args.repeats):  # the copy's cost, measured afresh each time
        shutil.rmtree(copies, ignore_errors=True)
        start = time.perf_counter()
        local_rows(cache, str(copies))
        build_seconds.append(time.perf_counter() - start)
    copy_bytes = sum(f.stat().st_size for f in copies.rglob("*") if f.is_file())
    group_bytes = decoded * group_rows // totals["rows"]
    ds = Dataset.from_cache(str(cache_dir))
    budgets: dict[str, Any] = {}
    windows: dict[int, int] = {}
    for fraction in (1, 8, 64):
        random_access.DECODE_BUDGET = max(1, decoded // fraction)
        window = max(1, random_access.DECODE_BUDGET // group_bytes) * group_rows  # the row groups the budget holds
        windows[fraction] = window
        rounds: dict[str, list[float]] = {k: [] for k in ("sequential", "shuffle, decoding", "shuffle, local copy", "window, decoding")}
        decoded_rows: list[int] = []
        for _ in range(args.repeats):
            rounds["sequential"].append(tokens_per_s(ds.batch(16))[0])
            rate, rows = tokens_per_s(ds.global_shuffle(seed=0, local_copy=False).batch(16), args.decode_seconds)
            rounds["shuffle, decoding"].append(rate)
            decoded_rows.append(rows)
            rounds["shuffle, local copy"].append(tokens_per_s(ds.global_shuffle(seed=0, local_copy=str(copies)).batch(16))[0])
            rounds["window, decoding"].append(tokens_per_s(ds.global_shuffle(seed=0, window=window, local_copy=False).batch(16), args.decode_seconds)[0])
        base = rounds["sequential"]

        def paired(name: str, rounds: dict[str, list[float]] = rounds, base: list[float] = base) -> float:
            return statistics.median(x / y for x, y in zip(rounds[name], base))

        first_epoch = [
            (totals["tokens"]) / (b + totals["tokens"] / r) for b, r in zip(build_seconds, rounds["shuffle, local copy"])
        ]
        budgets[f"cache = {fraction}x the decode budget"] = {
            "decode budget bytes": random_access.DECODE_BUDGET,
            "tokens_per_s": {k: statistics.median(v) for k, v in rounds.items()},
            "runs": rounds,
            "rows timed decoding (capped by --decode-seconds)": decoded_rows,
            "ratios to sequential": {
                "global shuffle, decoding row groups": paired("shuffle, decoding"),
                "global shuffle, local copy": paired("shuffle, local copy"),
                f"windowed shuffle (window {window} rows), decoding": paired("window, decoding"),
                "global shuffle, local copy, first epoch counting the copy": statistics.median(
                    f / s for f, s in zip(first_epoch, base)
                ),
            },
        }
        print(f"  {fraction:>2}x budget: " + ", ".join(f"{k} {v:.3f}x" for k, v in budgets[f'cache = {fraction}x the decode budget']["ratios to sequential"].items()))
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}",
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/shuffle_read.py " + " ".join(sys.argv[1:]),
        "corpus": {"source": "the shipped prose (data/corpus), repeated, one JSONL file", "mb": text.stat().st_size / 1e6},
        "cache": {
            "options": f"GPT-2, ensure_bos_eos, concat_chunk({args.seq_len}), default row groups",
            "rows": totals["rows"],
            "tokens": totals["tokens"],
            "row_group_rows": group_rows,
            "parquet bytes": totals["bytes"],
            "decoded bytes": decoded,
        },
        "local copy": {"bytes": copy_bytes, "build seconds": build_seconds, "build tokens_per_s": totals["tokens"] / statistics.median(build_seconds)},
        "budgets": budgets,
        "order quality": {
            "full shuffle": quality(str(cache_dir), totals["rows"], group_rows, None),
            **{f"window {w} rows": quality(str(cache_dir), totals["rows"], group_rows, w) for w in sorted(set(windows.values()))},
            "cache order": {"consecutive rows from one row group": 1 - 1 / group_rows, "position/row correlation": 1.0},
        },
    }
    write_results("shuffle_read.json", results)
    shutil.rmtree(copies, ignore_errors=True)


if __name__ == "__main__":
    main()

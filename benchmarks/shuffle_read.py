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
- the locality-aware option (``window``: the rows of as many row groups as the budget holds) decoding in memory;
- on the same text cached with small row groups (``--spread-group-rows``), a sequential read
  and the spread shuffle (``spread=K``, K units of a row group each, K what the budget holds
  at two groups a unit) decoding in memory, paired with that cache's sequential read;
- the order's quality for each (no reading): the share of consecutive rows from the same row
  group, document and input shard; the correlation of output position with cache row; how
  far a row moves, as a share of the epoch.
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
from beamtok._src.cache.read import random_access
from beamtok._src.cache.read.local_rows import local_rows
from beamtok._src.cache.read.reader import Cache
from beamtok._src.cache.read.shuffle_rows import decoded_bytes

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


def provenance(cache_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """Each cache row's (input shard, document) as arrays, in cache row order."""
    shards, docs = [], []
    for block in Cache(cache_dir).all_blocks():
        shards.append(block.shard)
        docs.append(block.doc_array)
    return np.concatenate(shards), np.concatenate(docs)


def quality(order: np.ndarray, group_rows: int | np.ndarray, shard: np.ndarray, doc: np.ndarray) -> dict[str, float]:
    """How far an epoch's order (cache rows by position) is from the cache's: the share of
    consecutive rows from one row group, from one document, from one input shard; the
    correlation of position with cache row (0: no trace of the cache's order); and how far a
    row moves, as a share of the epoch (a uniform permutation: 1/3 on average). ``group_rows``:
    the rows of a row group, or each row's row-group number."""
    rows = len(order)
    group = np.arange(rows) // group_rows if isinstance(group_rows, int) else group_rows
    same = lambda key: float(np.mean(key[order[1:]] == key[order[:-1]]))  # noqa: E731
    return {
        "consecutive rows from one row group": same(group),
        "consecutive rows from one document": float(
            np.mean((shard[order[1:]] == shard[order[:-1]]) & (doc[order[1:]] == doc[order[:-1]]))
        ),
        "consecutive rows from one input shard": same(shard),
        "position/row correlation": float(np.corrcoef(np.arange(rows), order)[0, 1]),
        "mean move, share of the epoch (uniform: 0.333)": float(np.mean(np.abs(np.arange(rows) - order)) / rows),
    }


def order_of(rows: int, *, window: int | None = None, spread: int | None = None, unit: int | None = None) -> np.ndarray:
    """Epoch 0's rows in order (a spread order's holes left out; the cache is one shard)."""
    from beamtok._src.stream.global_order.order import GlobalOrder
    from beamtok._src.stream.global_order.shard_units import ShardUnits

    units = ShardUnits([rows], unit) if spread is not None and unit is not None else None
    order = GlobalOrder(rows, seed=0, epoch=0, window=window, spread=spread, units=units)
    at = order.rows_at(np.arange(order.positions, dtype=np.int64))
    return at[at >= 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=40.0)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--decode-seconds", type=float, default=8.0)
    parser.add_argument(
        "--spread-group-rows", type=int, default=64, help="row groups of the cache the spread shuffle is measured on"
    )
    args = parser.parse_args()
    text = build_jsonl(f"shuffle-read-{args.mb:g}mb", int(args.mb * 1e6))
    cache_dir = WORK / f"shuffle-read-{args.mb:g}mb-{args.seq_len}"
    if not (cache_dir / "manifest.json").exists():
        shutil.rmtree(cache_dir, ignore_errors=True)
        Dataset.from_files([str(text)]).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(args.seq_len).cache(
            str(cache_dir)
        )
    small_dir = WORK / f"shuffle-read-{args.mb:g}mb-{args.seq_len}-groups-{args.spread_group_rows}"
    if not (small_dir / "manifest.json").exists():
        shutil.rmtree(small_dir, ignore_errors=True)
        Dataset.from_files([str(text)]).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(args.seq_len).cache(
            str(small_dir), row_group_rows=args.spread_group_rows
        )
    small = Dataset.from_cache(str(small_dir))
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
    spreads: dict[int, int] = {}
    small_group_bytes = decoded * args.spread_group_rows // totals["rows"]
    for fraction in (1, 8, 64):
        random_access.DECODE_BUDGET = max(1, decoded // fraction)
        window = max(1, random_access.DECODE_BUDGET // group_bytes) * group_rows  # the row groups the budget holds
        windows[fraction] = window
        spread = max(
            1, random_access.DECODE_BUDGET // small_group_bytes // 2
        )  # units a unit may straddle two groups of
        spreads[fraction] = spread
        rounds: dict[str, list[float]] = {
            k: []
            for k in (
                "sequential",
                "shuffle, decoding",
                "shuffle, local copy",
                "window, decoding",
                "small groups: sequential",
                "small groups: spread, decoding",
            )
        }
        decoded_rows: list[int] = []
        for _ in range(args.repeats):
            rounds["sequential"].append(tokens_per_s(ds.batch(16))[0])
            rate, rows = tokens_per_s(ds.global_shuffle(seed=0, local_copy=False).batch(16), args.decode_seconds)
            rounds["shuffle, decoding"].append(rate)
            decoded_rows.append(rows)
            rounds["shuffle, local copy"].append(
                tokens_per_s(ds.global_shuffle(seed=0, local_copy=str(copies)).batch(16))[0]
            )
            rounds["window, decoding"].append(
                tokens_per_s(ds.global_shuffle(seed=0, window=window, local_copy=False).batch(16), args.decode_seconds)[
                    0
                ]
            )
            rounds["small groups: sequential"].append(tokens_per_s(small.batch(16))[0])
            spread_ds = small.global_shuffle(seed=0, spread=spread, unit_rows=args.spread_group_rows).batch(16)
            rounds["small groups: spread, decoding"].append(tokens_per_s(spread_ds, args.decode_seconds)[0])
        base = rounds["sequential"]

        def paired(name: str, rounds: dict[str, list[float]] = rounds, base: list[float] = base) -> float:
            return statistics.median(x / y for x, y in zip(rounds[name], base))

        first_epoch = [
            (totals["tokens"]) / (b + totals["tokens"] / r)
            for b, r in zip(build_seconds, rounds["shuffle, local copy"])
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
                f"spread shuffle ({spread} units of {args.spread_group_rows} rows), decoding, against a sequential read of that cache": statistics.median(
                    x / y for x, y in zip(rounds["small groups: spread, decoding"], rounds["small groups: sequential"])
                ),
                f"spread shuffle ({spread} units of {args.spread_group_rows} rows), decoding, against a sequential read of the default layout": paired(
                    "small groups: spread, decoding"
                ),
                f"sequential read, row groups of {args.spread_group_rows} rows against the default layout": paired(
                    "small groups: sequential"
                ),
            },
        }
        print(
            f"  {fraction:>2}x budget: "
            + ", ".join(
                f"{k} {v:.3f}x"
                for k, v in budgets[f"cache = {fraction}x the decode budget"]["ratios to sequential"].items()
            )
        )
    rows = totals["rows"]
    shard, doc = provenance(str(cache_dir))
    results = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}",
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/shuffle_read.py " + " ".join(sys.argv[1:]),
        "corpus": {
            "source": "the shipped prose (data/corpus), repeated, one JSONL file",
            "mb": text.stat().st_size / 1e6,
        },
        "cache": {
            "options": f"GPT-2, ensure_bos_eos, concat_chunk({args.seq_len}), default row groups",
            "rows": totals["rows"],
            "tokens": totals["tokens"],
            "row_group_rows": group_rows,
            "parquet bytes": totals["bytes"],
            "decoded bytes": decoded,
        },
        "local copy": {
            "bytes": copy_bytes,
            "build seconds": build_seconds,
            "build tokens_per_s": totals["tokens"] / statistics.median(build_seconds),
        },
        "budgets": budgets,
        "order quality": {
            f"row groups of {group_rows} rows": {
                "full shuffle": quality(order_of(rows), group_rows, shard, doc),
                **{
                    f"window {w} rows": quality(order_of(rows, window=w), group_rows, shard, doc)
                    for w in sorted(set(windows.values()))
                },
                "cache order": quality(np.arange(rows), group_rows, shard, doc),
            },
            f"row groups of {args.spread_group_rows} rows": {
                "full shuffle": quality(order_of(rows), args.spread_group_rows, shard, doc),
                **{
                    f"spread {k} units of {args.spread_group_rows} rows": quality(
                        order_of(rows, spread=k, unit=args.spread_group_rows), args.spread_group_rows, shard, doc
                    )
                    for k in sorted(set(spreads.values()))
                },
                **{
                    f"window {k * args.spread_group_rows} rows": quality(
                        order_of(rows, window=k * args.spread_group_rows), args.spread_group_rows, shard, doc
                    )
                    for k in sorted(set(spreads.values()))
                },
            },
        },
    }
    write_results("shuffle_read.json", results)
    shutil.rmtree(copies, ignore_errors=True)


if __name__ == "__main__":
    main()

"""The spread global shuffle on a cache of the default layout, many times a reader's decode budget.

    python benchmarks/spread_read.py [--mb 2000] [--files 8] [--repeats 3] [--decode-seconds 10]

Builds ``--files`` JSONL files of real text (the shipped prose, repeated) and their cache with
default options (GPT-2, ``ensure_bos_eos``, ``concat_chunk(512)``, row groups of the default
8 MB of tokens: 4,096 rows), so each shard's row count is not a multiple of a row group's and
the last group of each shard is short. Then, with the decode budget set to 1/8 and 1/64 of the
decoded cache, times in rounds (ratios are medians of same-round pairs):
- a sequential read of the cache (``batch(16)``): the baseline;
- the spread shuffle (``spread=K``, units of one row group), decoding in memory, over at
  most ``--decode-seconds``, with K the decoded row groups the budget holds (as the decode
  pool counts them; no room is left to decode the next window ahead), and with K half that
  (the next window's groups decoded ahead on a helper thread, as a sequential read decodes
  its next groups);
and counts the row groups it decoded against the row groups its rows came from (1.0: each
group decoded once). Also reports the order's quality at the largest K against the
whole-cache permutation (consecutive rows from one row group, document, input shard;
position/row correlation; mean move). Writes benchmarks/results/spread_read.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import shutil
import statistics
import time

import numpy as np
from shuffle_read import provenance, quality, tokens_per_s

from beamtok import Dataset
from beamtok._src.cache.read import random_access
from beamtok._src.cache.read.random_access import RowAccess
from beamtok._src.cache.read.reader import Cache
from beamtok._src.cache.read.shuffle_rows import decoded_bytes
from beamtok._src.stream.global_order.order import GlobalOrder
from beamtok._src.stream.global_order.shard_units import ShardUnits

from common import ROOT, WORK, build_jsonl, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
SEQ_LEN = 512


def build_cache(mb: float, files: int) -> str:
    texts = [str(build_jsonl(f"spread-read-{mb / files:g}mb-{i:02d}", int(mb * 1e6 / files))) for i in range(files)]
    cache_dir = WORK / f"spread-read-{mb:g}mb-{files}-files"
    if not (cache_dir / "manifest.json").exists():
        shutil.rmtree(cache_dir, ignore_errors=True)
        start = time.perf_counter()
        Dataset.from_files(texts).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(SEQ_LEN).cache(
            str(cache_dir), direct_num_workers=2
        )
        print(f"  cache built in {time.perf_counter() - start:.0f} s")
    return str(cache_dir)


def spread_read(ds: Dataset, spread: int, unit: int, seconds: float) -> tuple[float, float]:
    """The spread shuffle's rate, and row groups decoded per row group its rows came from."""
    it = ds.global_shuffle(seed=0, spread=spread, unit_rows=unit, local_copy=False).batch(16).iter()
    start = time.perf_counter()
    tokens = 0
    groups: set[tuple[int, int]] = set()
    for batch in it:
        tokens += int(np.count_nonzero(batch["segment_ids"]))
        groups.update(zip(batch["shard"].tolist(), (batch["index"] // unit).tolist()))
        if time.perf_counter() - start > seconds:
            break
    rate = tokens / (time.perf_counter() - start)
    access = it.source.source.opened()
    return rate, access.groups_decoded / len(groups)


def spread_order(rows: int, spread: int, units: ShardUnits) -> np.ndarray:
    """Epoch 0's rows in order, holes left out."""
    at = GlobalOrder(rows, 0, 0, None, spread, units).rows_at(np.arange(units.positions, dtype=np.int64))
    return at[at >= 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=2000.0)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--decode-seconds", type=float, default=10.0)
    args = parser.parse_args()
    cache_dir = build_cache(args.mb, args.files)
    cache = Cache(cache_dir)
    totals = cache.manifest.totals
    shard_rows = [int(n) for n in cache.manifest.column("rows")]
    import pyarrow.parquet as pq

    unit = pq.ParquetFile(cache.storage.path(cache.manifest.shards[0].file)).metadata.row_group(0).num_rows
    groups = sum(-(-n // unit) for n in shard_rows)
    decoded = decoded_bytes(cache)
    probe = RowAccess(cache)  # what one decoded row group holds in a reader's decode pool
    probe.block(np.zeros(1, dtype=np.int64))
    group_bytes = probe.pool.held
    probe.close()
    ds = Dataset.from_cache(cache_dir)
    budgets = {}
    spreads = []
    for fraction in (8, 64):
        random_access.DECODE_BUDGET = max(1, decoded // fraction)
        fits = random_access.DECODE_BUDGET // group_bytes
        kinds = {
            f"spread {max(2, fits)} units": max(2, fits),
            f"spread {max(2, fits // 2)} units, next window decoded ahead": max(2, fits // 2),
        }
        spreads.extend(kinds.values())
        rounds: dict[str, list[float]] = {"sequential": [], **{name: [] for name in kinds}}
        decodes: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(args.repeats):
            rounds["sequential"].append(tokens_per_s(ds.batch(16))[0])
            for name, spread in kinds.items():
                rate, per_group = spread_read(ds, spread, unit, args.decode_seconds)
                rounds[name].append(rate)
                decodes[name].append(per_group)
        ratios = {name: statistics.median(x / y for x, y in zip(rounds[name], rounds["sequential"])) for name in kinds}
        budgets[f"cache = {fraction}x the decode budget"] = {
            "decode budget bytes": random_access.DECODE_BUDGET,
            "decoded row groups the budget holds": fits,
            "tokens_per_s": {k: statistics.median(v) for k, v in rounds.items()},
            "runs": rounds,
            "row groups decoded per row group read": decodes,
            "spread / sequential read of the same cache": ratios,
        }
        for name in kinds:
            print(
                f"  {fraction}x budget, {name}: spread / sequential {ratios[name]:.3f}x, groups decoded per group read {statistics.median(decodes[name]):.2f}"
            )
    rows = totals["rows"]
    shard, doc = provenance(cache_dir)
    starts = np.repeat(np.concatenate([[0], np.cumsum(shard_rows)[:-1]]), shard_rows)
    group = (
        np.repeat(np.arange(len(shard_rows)), shard_rows) * (1 << 32) + (np.arange(rows) - starts) // unit
    )  # (shard, group) as one number
    units = ShardUnits(shard_rows, unit)
    order_quality = {
        "full shuffle": quality(GlobalOrder(rows, seed=0, epoch=0).rows_at(np.arange(rows)), group, shard, doc),
        **{
            f"spread {k} units of {unit} rows": quality(spread_order(rows, k, units), group, shard, doc)
            for k in sorted(set(spreads))
        },
        "cache order": quality(np.arange(rows), group, shard, doc),
    }
    write_results(
        "spread_read.json",
        {
            "corpus": {"source": "the shipped prose (data/corpus), repeated", "files": args.files, "mb": args.mb},
            "cache": {
                "options": f"GPT-2, ensure_bos_eos, concat_chunk({SEQ_LEN}), default row groups",
                "shards": len(shard_rows),
                "rows per shard": shard_rows,
                "row_group_rows": unit,
                "row groups": groups,
                "rows": rows,
                "tokens": totals["tokens"],
                "parquet bytes": totals["bytes"],
                "decoded bytes": decoded,
            },
            "budgets": budgets,
            "order quality": order_quality,
        },
    )


if __name__ == "__main__":
    main()

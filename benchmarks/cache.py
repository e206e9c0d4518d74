"""Cache build and read speed, as ratios measured side by side in one run.

    python benchmarks/cache.py [--mb 24] [--shards 8] [--repeats 3]

Builds a corpus of real text (the shipped documents, repeated) split into shards, then times:
- the raw tokenizer: ``tokenizers`` ``encode_batch_fast`` over the same texts, one thread;
- the Beam cache build (files -> tokenize -> ensure_bos_eos -> concat_chunk(1024) -> Parquet),
  in-process and with ``multi_processing`` x2 (every tokenizer on one Rayon thread);
- cache reads: iterating ``Dataset.from_cache`` over every example, against plain pyarrow
  reading the same ``input_ids`` column into numpy, against plain pyarrow reading all four
  token columns an example carries, and against streaming on the fly.
Beam's import (a second or two, once per process) is timed apart from the builds.
Prints a table of medians and ratios and writes benchmarks/results/cache.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # one core per tokenizer, before tokenizers loads
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import platform
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from beamtok import Dataset, load_tokenizer
from beamtok.cache.schema import TOKEN_FIELDS

from common import ROOT, WORK, build_shards, median_seconds

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
RESULTS = Path(__file__).resolve().parent / "results"


def pipeline(paths: list[str]) -> Dataset:
    return Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(1024)




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=24.0)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    paths = build_shards("cache-bench", args.mb, args.shards)
    texts = [json.loads(line)["text"] for p in paths for line in open(p, encoding="utf-8")]
    tok = load_tokenizer(TOKENIZER)
    tokens = sum(len(ids) for ids in tok.encode_batch(texts)) + 2 * len(texts)  # + BOS/EOS

    def raw() -> None:
        for lo in range(0, len(texts), 64):
            tok.backend.encode_batch_fast(texts[lo : lo + 64], add_special_tokens=True)

    out = WORK / "cache-bench"
    results: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}",
        "corpus_mb": sum(os.path.getsize(p) for p in paths) / 1e6,
        "shards": len(paths),
        "tokens": tokens,
    }

    start = time.perf_counter()
    import beamtok.beam  # noqa: F401  (Beam's import, once per process, is timed apart)

    import_seconds = time.perf_counter() - start

    def build(**options: Any) -> None:
        shutil.rmtree(out, ignore_errors=True)
        pipeline(paths).cache(str(out), **options)

    # In rounds, so a drift of the machine's speed affects the baseline and the builds alike.
    timed: dict[str, list[float]] = {"raw encode_batch_fast, 1 thread": [], "Beam build, in-process": [], "Beam build, multi_processing x2": []}
    for _ in range(args.repeats):
        timed["raw encode_batch_fast, 1 thread"].append(median_seconds(raw, 1))
        timed["Beam build, in-process"].append(median_seconds(build, 1))
        timed["Beam build, multi_processing x2"].append(
            median_seconds(lambda: build(direct_running_mode="multi_processing", direct_num_workers=2), 1)
        )
    seconds = {k: statistics.median(v) for k, v in timed.items()}
    files = sorted(str(p) for p in (out / "shards").glob("*.parquet"))

    def plain_pyarrow() -> None:
        for f in files:
            pq.read_table(f, columns=["input_ids"]).column("input_ids").combine_chunks().values.to_numpy()

    def plain_pyarrow_all() -> None:
        for f in files:
            table = pq.read_table(f, columns=list(TOKEN_FIELDS))
            for name in TOKEN_FIELDS:
                table.column(name).combine_chunks().values.to_numpy()

    def cache_read() -> None:
        for _ in Dataset.from_cache(str(out)):
            pass

    def on_the_fly() -> None:
        for _ in pipeline(paths):
            pass

    seconds["plain pyarrow read of input_ids"] = median_seconds(plain_pyarrow, args.repeats)
    seconds["plain pyarrow read of all token columns"] = median_seconds(plain_pyarrow_all, args.repeats)
    seconds["cache read (from_cache)"] = median_seconds(cache_read, args.repeats)
    seconds["on-the-fly streaming, 1 thread"] = median_seconds(on_the_fly, 1)
    rates = {k: tokens / v for k, v in seconds.items()}
    raw_rate = rates["raw encode_batch_fast, 1 thread"]
    ratios = {
        "Beam in-process build / raw tokenizer (1 core)": rates["Beam build, in-process"] / raw_rate,
        "Beam multi_processing x2 / in-process": rates["Beam build, multi_processing x2"] / rates["Beam build, in-process"],
        "cache read / plain pyarrow": rates["cache read (from_cache)"] / rates["plain pyarrow read of input_ids"],
        "cache read / plain pyarrow, all token columns": rates["cache read (from_cache)"]
        / rates["plain pyarrow read of all token columns"],
        "cache read / on-the-fly": rates["cache read (from_cache)"] / rates["on-the-fly streaming, 1 thread"],
    }
    results.update(seconds=seconds, tokens_per_second=rates, ratios=ratios, beam_import_seconds=import_seconds)
    print(f"corpus: {results['corpus_mb']:.1f} MB in {len(paths)} shards, {tokens:,} tokens; {results['machine']}")
    for name, rate in rates.items():
        print(f"  {name:<40} {seconds[name]:8.2f} s {rate / 1e6:8.2f} M tokens/s")
    print(f"  (importing Beam took {import_seconds:.2f} s once, outside the build timings)")
    for name, ratio in ratios.items():
        print(f"  {name:<48} {ratio:8.2f}x")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cache.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

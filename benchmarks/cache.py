"""Cache build and read speed, as ratios measured side by side in one run.

    python benchmarks/cache.py [--mb 24] [--shards 8] [--repeats 3]

Builds a corpus of real text (the shipped documents, repeated) split into shards, then times:
- the raw tokenizer: ``tokenizers`` ``encode_batch_fast`` over the same texts, one thread;
- the Beam cache build (files -> tokenize -> ensure_bos_eos -> concat_chunk(1024) -> Parquet),
  in-process and with ``multi_processing`` x2 (every tokenizer on one Rayon thread);
- cache reads: ``Dataset.from_cache`` as examples and as ``batch(8)`` / ``batch(64)``, against
  plain pyarrow reading the same files' ``input_ids`` column into numpy, and every stored
  token column, each once per round with ratios taken within a round (after a warm-up round,
  which also times streaming on the fly against a cache read);
- the cache's size on disk per token.
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
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from beamtok import Dataset, load_tokenizer

from common import ROOT, WORK, build_shards, median_seconds, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


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
    import beamtok._src.beam.beam_import  # noqa: F401  (Beam's import, once per process, is timed apart)

    import_seconds = time.perf_counter() - start

    def build(**options: Any) -> None:
        shutil.rmtree(out, ignore_errors=True)
        pipeline(paths).cache(str(out), **options)

    # In rounds, so a drift of the machine's speed affects the baseline and the builds alike.
    timed: dict[str, list[float]] = {
        "raw encode_batch_fast, 1 thread": [],
        "Beam build, in-process": [],
        "Beam build, multi_processing x2": [],
    }
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
            table = pq.read_table(f)
            for name in table.column_names:
                if pa.types.is_list(table.column(name).type):
                    table.column(name).combine_chunks().values.to_numpy()

    def cache_examples() -> None:
        for _ in Dataset.from_cache(str(out)):
            pass

    def cache_batches(size: int) -> Callable[[], None]:
        def read() -> None:
            for _ in Dataset.from_cache(str(out)).batch(size):
                pass

        return read

    def on_the_fly() -> None:
        for _ in pipeline(paths):
            pass

    reads: dict[str, Callable[[], None]] = {
        "plain pyarrow read of input_ids": plain_pyarrow,
        "plain pyarrow read of every token column": plain_pyarrow_all,
        "cache read, examples": cache_examples,
        "cache read, batch(8)": cache_batches(8),
        "cache read, batch(64)": cache_batches(64),
    }
    # Every read once per round (after one warm-up round), ratios taken within a round.
    read_rounds: list[dict[str, float]] = []
    for r in range(args.repeats + 1):
        timings = {name: median_seconds(read, 1) for name, read in reads.items()}
        if r == 0:
            timings["on-the-fly streaming, 1 thread"] = median_seconds(on_the_fly, 1)
            timings["cache read, examples (same round as on-the-fly)"] = median_seconds(cache_examples, 1)
            on_the_fly_round = timings
            continue
        read_rounds.append(timings)
    for name in reads:
        seconds[name] = statistics.median(t[name] for t in read_rounds)
    seconds["on-the-fly streaming, 1 thread"] = on_the_fly_round["on-the-fly streaming, 1 thread"]
    rates = {k: tokens / v for k, v in seconds.items()}
    raw_rate = rates["raw encode_batch_fast, 1 thread"]

    def paired(a: str, b: str) -> float:
        return statistics.median(t[b] / t[a] for t in read_rounds)

    file_bytes = sum(os.path.getsize(f) for f in files)
    ratios = {
        "Beam in-process build / raw tokenizer (1 core)": rates["Beam build, in-process"] / raw_rate,
        "Beam multi_processing x2 / in-process": rates["Beam build, multi_processing x2"]
        / rates["Beam build, in-process"],
        "cache read batch(8) / plain pyarrow input_ids": paired(
            "cache read, batch(8)", "plain pyarrow read of input_ids"
        ),
        "cache read batch(64) / plain pyarrow input_ids": paired(
            "cache read, batch(64)", "plain pyarrow read of input_ids"
        ),
        "cache read examples / plain pyarrow input_ids": paired(
            "cache read, examples", "plain pyarrow read of input_ids"
        ),
        "cache read batch(8) / plain pyarrow every token column": paired(
            "cache read, batch(8)", "plain pyarrow read of every token column"
        ),
        "cache read examples / on-the-fly (one round)": on_the_fly_round["on-the-fly streaming, 1 thread"]
        / on_the_fly_round["cache read, examples (same round as on-the-fly)"],
    }
    results.update(
        seconds=seconds,
        tokens_per_second=rates,
        ratios=ratios,
        beam_import_seconds=import_seconds,
        read_rounds=read_rounds,
        cache_bytes_per_token=file_bytes / tokens,
        cache_bytes=file_bytes,
        row_groups=sum(pq.ParquetFile(f).metadata.num_row_groups for f in files),
    )
    print(f"corpus: {results['corpus_mb']:.1f} MB in {len(paths)} shards, {tokens:,} tokens; {results['machine']}")
    for name, rate in rates.items():
        print(f"  {name:<44} {seconds[name]:8.3f} s {rate / 1e6:8.2f} M tokens/s")
    print(f"  (importing Beam took {import_seconds:.2f} s once, outside the build timings)")
    print(f"  cache on disk: {file_bytes / tokens:.3f} bytes per token")
    for name, ratio in ratios.items():
        print(f"  {name:<56} {ratio:8.2f}x")
    write_results("cache.json", results)


if __name__ == "__main__":
    main()

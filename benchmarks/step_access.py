"""The batch of step N without reading the N before it: ``iter_at(N)`` against reading through.

    python benchmarks/step_access.py [--mb 100] [--repeats 3]

Builds a cache of one JSONL file of real text (the shipped prose, repeated; GPT-2,
``concat_chunk(1024)``) and, for two readings of it — in order (``interleave(1)``) and a
``global_shuffle(seed=0)`` — times, at 10%, 50% and 90% of the epoch's batches of 8, a fresh
iterator's ``iter_at(N)`` up to its first batch against a fresh iterator that reads the N
batches before it (what a loader without random access pays; also what ``skip`` costs on the
fly). Both are checked to return the same batch. Medians of ``--repeats`` rounds, the two
timed in the same round; writes benchmarks/results/step_access.json.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import sys
import time
from typing import Any

import numpy as np

from beamtok import Dataset, load_tokenizer

from common import ROOT, WORK, build_jsonl, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


def first_batch_seconds(make: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    with make() as it:
        batch = next(it)
    return time.perf_counter() - start, batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    load_tokenizer(TOKENIZER)
    source = build_jsonl("step-access", int(args.mb * 1e6))
    directory = WORK / f"step-access-cache-{args.mb:g}mb"
    cache = (
        Dataset.from_files(str(source)).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(1024).cache(str(directory))
    )
    readings = {
        "in order": lambda: cache.interleave(1).batch(8),
        "global shuffle": lambda: cache.global_shuffle(seed=0).batch(8),
    }
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/step_access.py " + " ".join(sys.argv[1:]),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
        "cache": {"source_mb": source.stat().st_size / 1e6, "rows": sum(1 for _ in cache.interleave(1))},
        "readings": {},
    }
    for name, make in readings.items():
        batches = sum(1 for _ in make())
        at: dict[str, Any] = {"batches": batches}
        for pct in (10, 50, 90):
            step = batches * pct // 100
            seek, read = [], []
            for _ in range(args.repeats):
                seconds, sought = first_batch_seconds(lambda m=make, s=step: m().iter_at(s))
                seek.append(seconds)

                def read_through(m: Any = make, s: int = step) -> Any:
                    it = m().iter()
                    for _ in itertools.islice(it, s):
                        pass
                    return it

                seconds, read_batch = first_batch_seconds(read_through)
                read.append(seconds)
                assert np.array_equal(sought["input_ids"], read_batch["input_ids"]), "the two ways disagree"
            at[f"{pct}%"] = {
                "step": step,
                "seek_s": statistics.median(seek),
                "read_through_s": statistics.median(read),
                "read_through_over_seek": statistics.median(r / s for r, s in zip(read, seek)),
            }
            print(name, f"{pct}%", {k: round(v, 4) for k, v in at[f"{pct}%"].items()}, flush=True)
        results["readings"][name] = at
    write_results("step_access.json", results)


if __name__ == "__main__":
    main()

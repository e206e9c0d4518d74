"""How long a tokenizing pipeline takes to its first batch through 2 DataLoader workers, and
the CPU the workers spend, with the fast-path encoder built once before the workers fork
(what ``to_torch()`` does where workers fork) against each worker building its own.

    python benchmarks/worker_start.py [--tokenizers gpt2,llama3] [--rounds 3]

Each measurement runs in a fresh interpreter: it loads the tokenizer, makes the dataset (64 KB
of shipped prose in 4 shards, tokenized and packed at 1024, batches of 8), makes the adapter
and a ``StatefulDataLoader`` with 2 forked workers, and reads every batch. "first batch" is the
wall time from making the adapter to the first batch in hand; "workers' CPU" is the user and
system time of the worker processes (``RUSAGE_CHILDREN`` once they have ended). The two modes
alternate within each round. The baseline turns the build off by making the adapter believe
workers are not forked.

Writes benchmarks/results/worker_start.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODES = ("built before the fork", "each worker builds its own")

READ = r"""
import json, resource, sys, time
from torchdata.stateful_dataloader import StatefulDataLoader
import beamtok._src.stream.torch_dataset as torch_dataset
from beamtok import Dataset

tokenizer, mode, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
if mode == "each worker builds its own":
    torch_dataset._forks_workers = lambda: False
ds = Dataset.from_files(paths).tokenize(tokenizer).ensure_bos_eos().concat_chunk(1024).batch(8)
started = time.perf_counter()
own = resource.getrusage(resource.RUSAGE_SELF)
loader = iter(StatefulDataLoader(ds.to_torch(), batch_size=None, num_workers=2, multiprocessing_context="fork"))
next(loader)
first = time.perf_counter() - started
batches = 1 + sum(1 for _ in loader)
total = time.perf_counter() - started
del loader
mine = resource.getrusage(resource.RUSAGE_SELF)
workers = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "first_batch_s": first, "all_batches_s": total, "batches": batches,
    "workers_cpu_s": workers.ru_utime + workers.ru_stime,
    "trainer_cpu_s": (mine.ru_utime + mine.ru_stime) - (own.ru_utime + own.ru_stime),
}))
"""


def measure(tokenizer: str, mode: str, paths: list[str]) -> dict[str, Any]:
    from common import measured

    return measured([sys.executable, "-W", "ignore", "-c", READ, tokenizer, mode, *paths], f"{tokenizer}, {mode}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizers", default="gpt2,llama3")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="worker_start.json")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from fast_path import tokenizer_dir

    from common import build_shards, write_results

    paths = build_shards("worker-start", 0.064, 4)
    results: dict[str, Any] = {"modes": list(MODES), "tokenizers": {}}
    for name in args.tokenizers.split(","):
        directory = tokenizer_dir(name)
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
        for r in range(args.rounds):
            for mode in MODES if r % 2 == 0 else tuple(reversed(MODES)):
                runs[mode].append(measure(directory, mode, paths))
        medians = {
            m: {k: statistics.median(run[k] for run in v) for k in ("first_batch_s", "workers_cpu_s", "trainer_cpu_s")}
            for m, v in runs.items()
        }
        built, own = medians[MODES[0]], medians[MODES[1]]
        ratio = {
            "first_batch_own_over_built": own["first_batch_s"] / built["first_batch_s"],
            "workers_cpu_own_over_built": own["workers_cpu_s"] / built["workers_cpu_s"],
        }
        results["tokenizers"][name] = {"medians": medians, "ratios": ratio, "runs": runs}
        for mode in MODES:
            m = medians[mode]
            print(
                f"  {name:<8} {mode:<28} first batch {m['first_batch_s']:5.2f} s  "
                f"workers' CPU {m['workers_cpu_s']:5.2f} s  trainer's CPU {m['trainer_cpu_s']:5.2f} s"
            )
    write_results(args.out, results, corpus="shipped prose, 64 KB in 4 shards")


if __name__ == "__main__":
    main()

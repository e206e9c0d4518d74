"""Tokenizing on the fly through torch DataLoader workers against one process, and where the
workers' time goes.

    python benchmarks/dataloader_workers.py [--mb 40] [--rounds 3] [--tokenizer gpt2]

The pipeline is the one users write: ``Dataset.from_files(4 files).tokenize(...)
.ensure_bos_eos().concat_chunk(2048).batch(8, tensors="torch")``, read in one process, and
through ``StatefulDataLoader(ds.to_torch(), batch_size=None, num_workers=2)`` with the main
process only receiving; each mode in a fresh interpreter, in turns each round.

Each gives the wall time from making the pipeline to its last batch (torch and torchdata
imported before), the rate after the first batch, the CPU of the main process and of the
workers (``RUSAGE_CHILDREN`` once they have ended), and, in each worker, the seconds spent
making batches (inside the dataset's ``next``) against the seconds from its first batch to its
last: the rest is the loader's own work in the worker and waiting for the main process to ask
for the next batch. Writes
benchmarks/results/dataloader_workers.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from fast_path import tokenizer_dir

from common import build_shards, machine_line, write_results

MODES = ("one process", "2 workers")

READ = r"""
import gc, json, resource, sys, time
import torch
from torchdata.stateful_dataloader import StatefulDataLoader
from beamtok import Dataset
import beamtok._src.stream.torch_dataset as torch_dataset

mode, tokenizer, paths, log_dir = sys.argv[1], sys.argv[2], sys.argv[4:], sys.argv[3]
shipped_iter = torch_dataset.TorchIterableDataset.__iter__

def timed_iter(self):  # in each worker: the time spent making each batch, and when
    batches = shipped_iter(self)
    worker = torch.utils.data.get_worker_info().id
    def made():
        making = 0.0
        first = last = None
        asked = time.perf_counter()
        for batch in batches:
            now = time.perf_counter()
            making += now - asked
            first = now if first is None else first
            last = now
            with open(f"{log_dir}/worker-{worker}.json", "w") as log:
                json.dump({"making_s": making, "first_to_last_s": last - first}, log)
            yield batch
            asked = time.perf_counter()
    return made()

torch_dataset.TorchIterableDataset.__iter__ = timed_iter
before = resource.getrusage(resource.RUSAGE_SELF)
started = time.perf_counter()
ds = Dataset.from_files(paths).tokenize(tokenizer).ensure_bos_eos().concat_chunk(2048).batch(8, tensors="torch")
batches = ds if mode == "one process" else StatefulDataLoader(ds.to_torch(), batch_size=None, num_workers=2)
tokens, first = 0, None
for batch in batches:
    if first is None:
        first = time.perf_counter()
    tokens += batch["input_ids"].numel()
end = time.perf_counter()
del batches
gc.collect()
time.sleep(0.3)  # the workers are joined and reaped
own = resource.getrusage(resource.RUSAGE_SELF)
children = resource.getrusage(resource.RUSAGE_CHILDREN)
import glob
workers = [json.load(open(p)) for p in sorted(glob.glob(f"{log_dir}/worker-*.json"))]
print(json.dumps({
    "workers_making_s": [w["making_s"] for w in workers],
    "workers_first_to_last_s": [w["first_to_last_s"] for w in workers],
    "tokens": tokens, "wall_s": end - started, "first_batch_s": first - started,
    "after_first_tokens_per_s": tokens / (end - first),
    "main_cpu_s": own.ru_utime + own.ru_stime - before.ru_utime - before.ru_stime,
    "workers_cpu_s": children.ru_utime + children.ru_stime,
}))
"""


def measure(mode: str, tokenizer: str, paths: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as log_dir:
        out = subprocess.run(
            [sys.executable, "-c", READ, mode, tokenizer, log_dir, *paths], capture_output=True, text=True, check=True
        )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=40.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokenizer", default="gpt2")
    parser.add_argument("--out", default="dataloader_workers.json")
    args = parser.parse_args()
    paths = build_shards("dataloader-workers", args.mb, 4)
    tokenizer = tokenizer_dir(args.tokenizer)
    rounds = []
    for r in range(args.rounds):
        one = {mode: measure(mode, tokenizer, paths) for mode in MODES}
        base = one["one process"]
        for mode in MODES[1:]:
            one[mode]["wall_over_one_process"] = base["wall_s"] / one[mode]["wall_s"]
            one[mode]["after_first_over_one_process"] = (
                one[mode]["after_first_tokens_per_s"] / base["after_first_tokens_per_s"]
            )
        rounds.append(one)
        print(r, {m: round(one[m]["wall_s"], 2) for m in MODES}, flush=True)
    summary = {
        mode: {
            key: statistics.median(r[mode][key] for r in rounds)
            for key in rounds[0][mode]
            if isinstance(rounds[0][mode][key], (int, float))
        }
        for mode in MODES
    }
    write_results(
        args.out,
        {"machine": machine_line(), "tokenizer": args.tokenizer, "medians": summary, "rounds": rounds},
        corpus=f"shipped prose, {args.mb:g} MB in 4 files",
    )


if __name__ == "__main__":
    main()

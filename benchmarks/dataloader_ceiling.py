"""How many batches torch's DataLoader hands over with 2 workers when a batch costs nothing to
make: the ceiling of any dataset read through DataLoader workers on this machine.

    python benchmarks/dataloader_ceiling.py [--batches 40000] [--rounds 3]

Each worker yields a ready object, so the time is the loader's own (the worker's loop, the
pickling, the pipe, the consumer's bookkeeping): an int (nothing to carry), and a batch of
beamtok's fields at 8 x 1024 in the one-buffer form beamtok's workers send (~130 KB). Through
``torch.utils.data.DataLoader`` and torchdata's ``StatefulDataLoader`` (what
``DistributedLoader`` uses), each in its own interpreter, in turns. Rates are given as batches
a second and as tokens a second at 8 x 1024 tokens a batch, to set against one process reading
a cache (``read_vs_litdata.py``: ~90-130 M tokens/s here).

Writes benchmarks/results/dataloader_ceiling.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TOKENS_A_BATCH = 8 * 1024
KINDS = ("DataLoader, an int", "StatefulDataLoader, an int", "StatefulDataLoader, a one-buffer batch")

READ = r"""
import json, sys, time
import numpy as np, torch
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader
from beamtok._src.stream.one_buffer import in_one_buffer

loader_kind, payload, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if payload == "batch":  # beamtok's fields at 8 x 1024
    rows = (8, 1024)
    made = in_one_buffer({
        "input_ids": torch.zeros(rows, dtype=torch.int32), "segment_ids": torch.zeros(rows, dtype=torch.int32),
        "position_ids": torch.zeros(rows, dtype=torch.int32), "loss_mask": torch.zeros(rows, dtype=torch.uint8),
        "shard": torch.zeros(8, dtype=torch.int64), "index": torch.zeros(8, dtype=torch.int64),
        "doc": torch.zeros(8, dtype=torch.int64), "token": torch.zeros(8, dtype=torch.int64),
    })
else:
    made = 1

class Ready(torch.utils.data.IterableDataset):
    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        for _ in range(info.id, count, info.num_workers):
            yield made

Loader = StatefulDataLoader if loader_kind == "stateful" else DataLoader
batches = iter(Loader(Ready(), batch_size=None, num_workers=2))
next(batches)
started = time.perf_counter()
n = sum(1 for _ in batches)
print(json.dumps({"batches": n, "seconds": time.perf_counter() - started}))
"""

ARGS = {
    "DataLoader, an int": ("torch", "int"),
    "StatefulDataLoader, an int": ("stateful", "int"),
    "StatefulDataLoader, a one-buffer batch": ("stateful", "batch"),
}


def measure(kind: str, batches: int) -> dict[str, Any]:
    from common import measured

    loader, payload = ARGS[kind]
    result = measured([sys.executable, "-W", "ignore", "-c", READ, loader, payload, str(batches)], kind)
    result["batches_per_s"] = result["batches"] / result["seconds"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="dataloader_ceiling.json")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    for r in range(args.rounds):
        for kind in KINDS if r % 2 == 0 else tuple(reversed(KINDS)):
            runs[kind].append(measure(kind, args.batches))
    rates = {k: statistics.median(x["batches_per_s"] for x in v) for k, v in runs.items()}
    results = {
        "batches_per_s": rates,
        "tokens_per_s_at_8x1024": {k: v * TOKENS_A_BATCH for k, v in rates.items()},
        "runs": runs,
    }
    for kind in KINDS:
        print(f"  {kind:<42} {rates[kind]:8.0f} batches/s  {rates[kind] * TOKENS_A_BATCH / 1e6:6.1f} M tokens/s")
    sys.path.insert(0, str(HERE))
    from common import write_results

    write_results(args.out, results, corpus="none: each worker yields a ready object")


if __name__ == "__main__":
    main()

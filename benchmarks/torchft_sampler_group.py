"""One replica group fed the way torchft's own examples feed it, for comparison with
``examples/torchft_train.py``: ``torchft.data.DistributedSampler`` gives group ``g`` of the
most groups there will be a fixed share of a cache's rows, read by a plain DataLoader; the
loader is kept out of the heal (as torchft's DDP training example does), so a restarted group reads
its share from the start. Same model, step loop and rows log as the beamtok example.

    python benchmarks/torchft_sampler_group.py --cache DIR [--groups 3] [--batch-size 8] --rows-log FILE
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader
from torchft import DistributedSampler, Manager, Optimizer, ProcessGroupGloo

from beamtok import Dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", required=True)
    parser.add_argument("--groups", type=int, default=3, help="the most replica groups the job will have")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--pg-timeout", type=float, default=5.0)
    parser.add_argument("--min-replicas", type=int, default=2, help="the lighthouse's --min_replicas")
    parser.add_argument("--rows-log", required=True)
    args = parser.parse_args()

    group = int(os.environ.get("REPLICA_GROUP_ID", "0"))
    beamtok_example = example()
    store = beamtok_example.own_store()
    torch.manual_seed(0)
    model = nn.Sequential(nn.EmbeddingBag(args.vocab, 16), nn.Linear(16, 1))
    manager = Manager(
        pg=ProcessGroupGloo(timeout=timedelta(seconds=args.pg_timeout)),
        min_replica_size=args.min_replicas,
        load_state_dict=model.load_state_dict,
        state_dict=model.state_dict,
        replica_id=f"sampler_{group}",
        timeout=timedelta(seconds=2 * args.pg_timeout),
        init_sync=False,
    )
    optimizer = Optimizer(manager, torch.optim.SGD(model.parameters(), lr=0.01))
    # the rows as the beamtok example's batches hold them (same dtype: the logs' hashes compare)
    rows = [
        row for batch in Dataset.from_cache(args.cache).batch(1, tensors="torch").iter() for row in batch["input_ids"]
    ]
    sampler = DistributedSampler(
        rows, replica_rank=group, num_replica_groups=args.groups, group_rank=0, num_replicas=1, shuffle=False
    )
    loader = DataLoader(rows, batch_size=args.batch_size, sampler=sampler)  # type: ignore[arg-type]
    log = open(args.rows_log, "a", buffering=1)
    attempt = 0
    for ids in loader:
        attempt += 1
        optimizer.zero_grad()
        step, reading = manager.current_step(), manager.is_participating()
        n = manager.num_participants()
        read = {"group": group, "pid": os.getpid(), "attempt": attempt, "step": step, "n": n}
        if reading:
            model[1](model[0](ids.clamp(max=args.vocab - 1))).square().mean().backward()
            log.write(json.dumps({**read, "item": attempt, "rows": beamtok_example.hashes(ids)}) + "\n")
        for p in model.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        for work in [manager.allreduce(p.grad) for p in model.parameters()]:
            work.wait()
        time.sleep(args.step_seconds)
        optimizer.step()
        record = {**read, "commit": manager.current_step() > step, "reading": reading, "at": time.time()}
        log.write(json.dumps(record) + "\n")
    manager.shutdown(wait=False)
    del store


def example() -> Any:
    """examples/torchft_train.py as a module: its row digests and its store for a plain process."""
    path = Path(__file__).resolve().parent.parent / "examples" / "torchft_train.py"
    spec = importlib.util.spec_from_file_location("torchft_train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    main()

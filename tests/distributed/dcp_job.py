"""A job run under torchrun by tests/distributed/test_dcp_checkpoint.py: for each pipeline kind, read some
batches through a DistributedLoader, save it with a tiny model (DDP-free: replicated, or FSDP2
``fully_shard``) in one DCP checkpoint; or load that checkpoint at this world size and read to
the end, meeting the other ranks in a barrier after every batch as a training step's all-reduce
would. Each rank writes the provenance of what it read and its step count to
``ROOT/rows-KIND-PHASE-RANK.json``."""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.checkpoint.stateful import Stateful

from beamtok import Dataset
from beamtok._src.distributed.process_group import start_process_group
from beamtok._src.distributed.torch_loader import DistributedLoader

BATCH = 4


class ModelState(Stateful):
    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def state_dict(self) -> dict[str, Any]:
        return get_model_state_dict(self.model)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_model_state_dict(self.model, state_dict)


def packed(files: list[str], tokenizer: str) -> Dataset:
    return Dataset.from_files(files).tokenize(tokenizer).ensure_bos_eos().concat_chunk(32)


def loader_for(kind: str, root: Path, tokenizer: str, workers: int, even: str | None) -> DistributedLoader:
    files = sorted(str(p) for p in (root / "data").glob("part-*.jsonl"))
    ds = packed(files, tokenizer)
    if kind == "shards":
        return DistributedLoader(ds.batch(BATCH), num_workers=workers, even=even)
    if kind == "one_file":  # fewer files than readers: cut into ranges by the loader
        return DistributedLoader(
            packed([str(root / "data" / "big.jsonl")], tokenizer).batch(BATCH), num_workers=workers, even=even
        )
    if kind == "cache_shards":
        return DistributedLoader(Dataset.from_cache(str(root / "cache")).batch(BATCH), num_workers=workers, even=even)
    if kind == "examples":
        return DistributedLoader(ds.batch(BATCH), split="examples", num_workers=workers, even=even)
    if kind == "balance":
        return DistributedLoader(
            lambda rank, world: ds.balance_ranks(BATCH, rank=rank, world_size=world), num_workers=workers, even=even
        )
    if kind == "mix":
        other = packed(sorted(str(p) for p in (root / "data").glob("other-*.jsonl")), tokenizer)
        mixed = Dataset.mix([ds, other], [0.7, 0.3], seed=0, max_epochs=1).batch(BATCH)
        return DistributedLoader(mixed, split="examples", num_workers=workers, even=even)
    if kind == "global_shuffle":
        return DistributedLoader(
            Dataset.from_cache(str(root / "cache")).global_shuffle(seed=3).batch(BATCH), num_workers=workers, even=even
        )
    raise SystemExit(f"unknown kind {kind}")


def provenance(batch: dict[str, Any]) -> list[list[int]]:
    source = batch["source"].tolist() if "source" in batch else [0] * len(batch["shard"])
    return [[s, int(a), int(b)] for s, a, b in zip(source, batch["shard"].tolist(), batch["index"].tolist())]


def main() -> None:
    start_process_group("gloo")
    run(parse_args())
    # The model, its FSDP mesh and the loaders are freed (run returned) before the process group,
    # with gloo's threads idle: at interpreter exit instead, a gloo thread that still frees the
    # last all-gather's tensors needs the GIL and is torn down ("terminate called without an
    # active exception", SIGABRT: a core dump shows ~AsyncAllgatherCoalescedWork on that thread)
    gc.collect()
    dist.destroy_process_group()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--phase", choices=["save", "resume"], required=True)
    parser.add_argument("--kinds", nargs="+", required=True)
    parser.add_argument("--steps", type=int, default=5, help="batches each rank reads before saving")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--fsdp", action="store_true")
    parser.add_argument("--ending", choices=["drop", "pad", "none"], default="pad")
    return parser.parse_args()


def run(args: argparse.Namespace) -> None:
    root = Path(args.root)
    rank = dist.get_rank()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 24), nn.Linear(24, 8))
    if args.fsdp:
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            fully_shard(layer)
        fully_shard(model)
    if args.phase == "resume":
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()  # the checkpoint must bring the weights back

    for kind in args.kinds:
        loader = loader_for(kind, root, args.tokenizer, args.workers, None if args.ending == "none" else args.ending)
        state = {"model": ModelState(model), "data": loader}
        checkpoint = root / f"ckpt-{kind}"
        rows: list[list[int]] = []
        steps = 0
        if args.phase == "save":
            for batch in loader:
                rows += provenance(batch)
                steps += 1
                if steps >= args.steps:
                    break
            dcp.save(state, checkpoint_id=str(checkpoint))
        else:
            dcp.load(state, checkpoint_id=str(checkpoint))
            for batch in loader:
                rows += provenance(batch)
                steps += 1
                dist.barrier()  # a training step's all-reduce: a rank left waiting here hangs the job
        (root / f"rows-{kind}-{args.phase}-{rank}.json").write_text(json.dumps({"rows": rows, "steps": steps}))
        full = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in get_model_state_dict(model).items()}
        if rank == 0:
            (root / f"weights-{kind}-{args.phase}.json").write_text(
                json.dumps({k: v.tolist() for k, v in full.items()})
            )
    dist.barrier()
    time.sleep(0.2)  # gloo's threads free the last collectives' work objects, which takes the GIL


if __name__ == "__main__":
    main()

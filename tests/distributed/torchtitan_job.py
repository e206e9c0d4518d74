"""A job run under torchrun by tests/distributed/test_torchtitan.py: torchtitan's own parts as
its trainer wires them (a ``BeamtokDataLoader`` built from its ``Config`` with the arguments
torchtitan's trainer passes, torchtitan's optimizers and LR schedulers, its DCP
``CheckpointManager``), on CPU with gloo. ``save``: train some steps and let the checkpoint
manager save; ``resume``: let it load the newest checkpoint at this world size and train to the
end of the data. Each rank writes the input rows it trained on to ``ROOT/rows-PHASE-RANK.json``.
torchtitan's ``Trainer`` itself is not run: it takes a CUDA device even on a machine without one."""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torchtitan.components.checkpoint import CheckpointManager
from torchtitan.components.optimizer import LRSchedulersContainer, OptimizersContainer, ParamGroupConfig

from beamtok._src.distributed.process_group import start_process_group
from beamtok._src.distributed.torchtitan_loader import BeamtokDataLoader

SEQ_LEN = 32
BATCH = 2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--phase", choices=["save", "resume"], required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--vocab", type=int, required=True)
    args = parser.parse_args()
    start_process_group("gloo")
    run(Path(args.root), args.phase, args.steps, args.workers, args.vocab)
    gc.collect()  # the loaders' gloo work freed before the process group (see dcp_job.py)
    dist.destroy_process_group()


def run(root: Path, phase: str, steps: int, workers: int, vocab: int) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(vocab, 8), nn.Linear(8, vocab))
    adamw = ParamGroupConfig(pattern=".*", optimizer_name="AdamW", optimizer_kwargs={"lr": 1e-3})
    optimizers = OptimizersContainer.Config(param_groups=[adamw], implementation="for-loop").build(model_parts=[model])
    schedulers = LRSchedulersContainer.Config(warmup_steps=1).build(optimizers=optimizers, training_steps=100)
    config = BeamtokDataLoader.Config(dataset_path=str(root / "data.yaml"), num_workers=workers, even=None)
    loader = config.build(  # the arguments torchtitan's trainer passes
        dp_world_size=world,
        dp_rank=rank,
        tokenizer=None,
        seq_len=SEQ_LEN,
        local_batch_size=BATCH,
        snapshot_every_n_steps=1,
    )
    checkpointer = CheckpointManager.Config(enable=True, folder="checkpoint", interval=1).build(
        dataloader=loader,
        model_parts=[model],
        optimizers=optimizers,
        lr_schedulers=schedulers,
        states={},
        sd_adapter=None,
        base_folder=str(root),
    )
    step = 0
    if phase == "resume":
        assert checkpointer.load(), "no checkpoint was loaded"
        step = steps
    rows: list[list[int]] = []
    short = False  # only a rank's last batch may be short: even=None leaves its share as it falls
    for inputs, labels in loader:
        assert not short, "a short batch before the rank's last"
        assert inputs["input"].shape[1:] == (SEQ_LEN,) and 1 <= len(inputs["input"]) <= BATCH
        assert labels.shape == inputs["input"].shape
        short = len(inputs["input"]) < BATCH
        rows += inputs["input"].tolist()
        logits = model(inputs["input"])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        loss.backward()
        optimizers.step()
        schedulers.step()
        optimizers.zero_grad()
        step += 1
        if phase == "save" and step == steps:
            checkpointer.save(curr_step=step)
            break
    (root / f"rows-{phase}-{rank}.json").write_text(json.dumps(rows))
    checkpointer.close()
    dist.barrier()
    time.sleep(0.2)


if __name__ == "__main__":
    main()

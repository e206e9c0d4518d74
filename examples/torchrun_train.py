"""Data-parallel training of a tiny causal LM with torchrun, DDP and one DCP checkpoint that
holds the model, the optimizer and beamtok's data position, resumable on any number of ranks.

Run from the repository root (CPU, gloo):

    .venv/bin/python -m torch.distributed.run --standalone --nproc-per-node 2 examples/torchrun_train.py \
        --data 'data/corpus/shakespeare-{00..03}.jsonl' --tokenizer data/tokenizers/gpt2 \
        --seq-len 128 --batch-size 4 --ckpt build/torchrun-ckpt --save-every 20 --max-steps 60 \
        --rows-log 'build/torchrun-rows-{rank}.jsonl'

Start it again, with any ``--nproc-per-node``, and it resumes from the newest complete
checkpoint in ``--ckpt``: the model and optimizer (resharded by DCP) and the data, with no row
lost or trained twice. It stops after global step ``--max-steps`` (counted from the start of
training) or when the data's one epoch ends, and saves a checkpoint there. At the end of the
data a rank whose share is used up trains on padding batches (no loss) while the others finish
(``DistributedLoader(even="pad")``), and a short last batch is padded to ``--batch-size``: no
row is dropped. ``--data`` may be one file on any number of ranks: files fewer than the
readers are cut into ranges. Under
``torchrun --max-restarts N`` a killed rank restarts the group, which resumes the same way.

Each rank appends one JSON line per step to ``--rows-log`` (``{rank}`` in the path is
replaced): ``{"step", "rank", "world", "restart", "loss", "rows"}``, where ``rows`` is each
row's provenance ``[shard, index]`` as the pipeline numbers it (``[-1, -1]`` for padding).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.nn.parallel import DistributedDataParallel

from beamtok import BeamtokError, Dataset, load_tokenizer
from beamtok.training import (
    DistributedLoader,
    end_process_group,
    mark_complete,
    newest_complete,
    start_process_group,
    step_directory,
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", required=True, help="files, globs or brace patterns")
    parser.add_argument("--tokenizer", required=True, help="a tokenizer directory")
    parser.add_argument("--seq-len", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True, help="rows per rank per step")
    parser.add_argument("--ckpt", required=True, help="checkpoint directory (resumed from when it holds one)")
    parser.add_argument("--save-every", type=int, required=True, help="save every K global steps")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this global step")
    parser.add_argument("--rows-log", required=True, help="per-rank JSON lines; {rank} is replaced")
    parser.add_argument("--num-workers", type=int, default=1, help="StatefulDataLoader workers per rank")
    parser.add_argument("--shuffle-window", type=int, default=16, help="examples shuffled together (0: off)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    return parser.parse_args()


class TinyLM(nn.Module):
    """One causal transformer layer over token and position embeddings."""

    def __init__(self, vocab_size: int, seq_len: int, dim: int = 32) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, dim)
        self.positions = nn.Embedding(seq_len, dim)
        self.block = nn.TransformerEncoderLayer(dim, nhead=2, dim_feedforward=2 * dim, dropout=0.0, batch_first=True)
        self.head = nn.Linear(dim, vocab_size)
        self.causal: torch.Tensor
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.tokens(input_ids) + self.positions(position_ids)
        hidden = self.block(hidden, src_mask=self.causal[: input_ids.shape[1], : input_ids.shape[1]], is_causal=True)
        return self.head(hidden)


class TrainState(Stateful):
    """Model and optimizer in DCP's resharding form, and the global step."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer, self.step = model, optimizer, 0

    def state_dict(self) -> dict[str, Any]:
        model, optimizer = get_state_dict(self.model, self.optimizer)
        return {"model": model, "optimizer": optimizer, "step": self.step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_state_dict(
            self.model, self.optimizer, model_state_dict=state_dict["model"], optim_state_dict=state_dict["optimizer"]
        )
        self.step = int(state_dict["step"])


def padded(batch: dict[str, torch.Tensor], rows: int, seq_len: int, pad_id: int) -> dict[str, torch.Tensor]:
    """``batch`` (a short last one) filled up to ``rows`` rows with padding rows (no loss, provenance -1)."""
    have = int(batch["input_ids"].shape[0])
    pad = {
        "input_ids": torch.full((rows - have, seq_len), pad_id, dtype=torch.int32),
        "position_ids": torch.zeros((rows - have, seq_len), dtype=torch.int32),
        "loss_mask": torch.zeros((rows - have, seq_len), dtype=torch.int8),
        "shard": torch.full((rows - have,), -1, dtype=torch.int64),
        "index": torch.full((rows - have,), -1, dtype=torch.int64),
    }
    return {key: torch.cat([batch[key], value]) for key, value in pad.items()}


def train(args: argparse.Namespace, restart: int) -> None:
    """Train to --max-steps or the end of the data, checkpointing as asked."""
    rank, world = dist.get_rank(), dist.get_world_size()

    dataset = Dataset.from_files(args.data).tokenize(args.tokenizer).ensure_bos_eos().concat_chunk(args.seq_len)
    if args.shuffle_window:
        dataset = dataset.shuffle(window=args.shuffle_window, seed=args.seed)
    dataset = dataset.batch(args.batch_size, tensors="torch")
    loader = DistributedLoader(dataset, num_workers=args.num_workers, even="pad")
    pad_id = dataset.spec.pad_id

    torch.manual_seed(args.seed)
    model = DistributedDataParallel(TinyLM(load_tokenizer(args.tokenizer).vocab_size, args.seq_len))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    progress = TrainState(model, optimizer)
    checkpoint = {"train": progress, "data": loader}
    newest = newest_complete(args.ckpt)
    if newest is not None:
        dcp.load(checkpoint, checkpoint_id=str(newest[1]))
    if rank == 0:
        print(
            f"rank 0 of {world}: " + (f"resumed at step {progress.step} from {newest[1]}" if newest else "starting"),
            flush=True,
        )

    def save() -> None:
        directory = step_directory(args.ckpt, progress.step)
        dcp.save(checkpoint, checkpoint_id=str(directory))
        if rank == 0:  # dcp.save returns once every rank's files and the metadata are written
            mark_complete(directory)
        dist.barrier()

    log_path = Path(args.rows_log.replace("{rank}", str(rank)))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "a")
    saved_at = progress.step
    batches = iter(loader)
    while args.max_steps is None or progress.step < args.max_steps:  # asked before a batch is taken
        batch = next(batches, None)
        if batch is None:  # every rank's loader ends at the same step (even="pad")
            break
        batch = padded(batch, args.batch_size, args.seq_len, pad_id)
        ids = batch["input_ids"].long()
        logits = model(ids, batch["position_ids"].long())
        losses = nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
        trained = batch["loss_mask"][:, 1:].flatten().float()
        tokens = trained.sum().detach()
        dist.all_reduce(tokens)  # the mean over every rank's trained tokens: DDP averages gradients over ranks
        loss = (losses * trained).sum() * world / tokens.clamp(min=1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        progress.step += 1
        reported = loss.detach() / world
        dist.all_reduce(reported)
        rows = torch.stack([batch["shard"], batch["index"]], dim=1).tolist()
        line = {
            "step": progress.step,
            "rank": rank,
            "world": world,
            "restart": restart,
            "loss": float(reported),
            "rows": rows,
        }
        log.write(json.dumps(line) + "\n")
        log.flush()
        if progress.step % args.save_every == 0:
            save()
            saved_at = progress.step
    if saved_at != progress.step:
        save()
    log.close()
    if rank == 0:
        print(f"stopped at step {progress.step} on {world} ranks", flush=True)


def main() -> None:
    args = parse_args()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    start_process_group("gloo")  # under this restart's own store prefix: --max-restarts restarts the group
    try:
        train(args, restart)
    except BeamtokError as error:  # a user's mistake (data that cannot be split, a bad path...): one line, no traceback
        if dist.get_rank() == 0:
            print(f"torchrun_train.py: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    # The model is freed (train returned) before the process group, with gloo's threads idle.
    # Freed at exit instead, DDP's reducer can drop the last reference to the group while a
    # gloo thread still frees a collective's tensors: the group's destructor joins that thread
    # holding the GIL the thread waits for, and the rank hangs at exit (seen with torch 2.13).
    end_process_group()


if __name__ == "__main__":
    main()

"""One replica group of a torchft job training on beamtok batches: groups may die and rejoin
mid-run, and every batch is still trained in exactly one committed step.

Start a lighthouse, then one process (or a ``torchrun`` of several ranks) per replica group::

    torchft_lighthouse --min_replicas 2 --quorum_tick_ms 100 --join_timeout_ms 1000 &
    for g in 0 1 2; do
      REPLICA_GROUP_ID=$g TORCHFT_LIGHTHOUSE=http://localhost:29510 \\
        python examples/torchft_train.py --cache /data/cache --batch-size 8 &
    done

A group killed and started again heals from a peer (weights and torchft's count of committed
batches, which is the data position) and reads again from the next step. See
``docs/fault-tolerance.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torchft import Manager, Optimizer, ProcessGroupGloo

from beamtok import Dataset, load_tokenizer
from beamtok.training import TorchftLoader, mark_complete, newest_complete, start_process_group, step_directory


def main() -> None:
    args = parse_args()
    if args.cache:
        dataset = Dataset.from_cache(args.cache)
    else:  # tokenized on the fly: every group tokenizes the batches before its own (a cache seeks instead)
        tokenizer = load_tokenizer(args.tokenizer)
        dataset = Dataset.from_files(args.files).tokenize(tokenizer).ensure_bos_eos().concat_chunk(args.seq_len)
    train(dataset.batch(args.batch_size, tensors="torch"), args)


def train(dataset: Dataset, args: argparse.Namespace) -> None:
    """Train this replica group on ``dataset`` (the global stream of batches) until every batch
    has been trained in a committed step."""
    group = int(os.environ.get("REPLICA_GROUP_ID", "0"))
    rank, width = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    store = own_store() if "MASTER_ADDR" not in os.environ else None  # torchrun hosts the group's store
    if width > 1:  # the group's own process group (FSDP's, in a real job): the loader agrees the end over it
        start_process_group("gloo")
    torch.manual_seed(0)  # every group starts from the same weights: init_sync=False
    model = nn.Sequential(nn.EmbeddingBag(args.vocab, 16), nn.Linear(16, 1))
    manager = Manager(
        pg=ProcessGroupGloo(timeout=timedelta(seconds=args.pg_timeout)),
        min_replica_size=args.min_replicas,  # a majority of the groups: no two quorums at once
        load_state_dict=model.load_state_dict,
        state_dict=model.state_dict,
        replica_id=f"beamtok_{group}",  # torchft reads the group's number from the trailing digits
        timeout=timedelta(seconds=2 * args.pg_timeout),
        init_sync=False,
        rank=rank,
        world_size=width,
    )
    optimizer = Optimizer(manager, torch.optim.SGD(model.parameters(), lr=0.01))
    if args.checkpoint_dir:  # a whole-job restart: weights and torchft's counts (the data position) as saved
        restore(args.checkpoint_dir, model, manager)
    loader = TorchftLoader(dataset, manager, group_rank=rank, group_world_size=width)
    log = open(args.rows_log, "a", buffering=1) if args.rows_log else None

    attempt = 0  # this process's steps, committed or not: ties a step's read to its commit in the log
    while not loader.finished:
        attempt += 1
        optimizer.zero_grad()  # starts the step's quorum
        batch = loader.next_batch()  # None while this group heals, or past the end of the data
        step, cursor, reading = manager.current_step(), loader.cursor, manager.is_participating()
        if batch is not None:
            ids = batch["input_ids"]
            loss = model[1](model[0](ids.clamp(max=args.vocab - 1))).square().mean()
            loss.backward()
            if log:
                read = {"group": group, "pid": os.getpid(), "attempt": attempt, "step": step, "item": loader.last_read}
                read.update(n=manager.num_participants(), width=width)
                log.write(json.dumps({**read, "rows": hashes(ids)}) + "\n")
        for p in model.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        for work in [manager.allreduce(p.grad) for p in model.parameters()]:
            work.wait()
        time.sleep(args.step_seconds)  # the rest of a real step's work
        optimizer.step()  # commits only where every group's vote says so
        committed = manager.current_step() > step
        if committed and args.checkpoint_dir and manager.current_step() % args.checkpoint_every == 0:
            if manager.participating_rank() == 0 and rank == 0:  # one copy: every group holds the same
                save(args.checkpoint_dir, model, manager)
        if log:
            n = manager.num_participants()
            record = {"group": group, "pid": os.getpid(), "attempt": attempt, "step": step, "commit": committed}
            record["at"] = time.time()
            log.write(json.dumps({**record, "cursor": cursor, "n": n, "reading": reading}) + "\n")
    manager.shutdown(wait=False)
    del store


def save(root: str, model: nn.Module, manager: Manager) -> None:
    """A DCP checkpoint of the weights and torchft's state (step, committed batches)."""
    directory = step_directory(root, manager.current_step())
    dcp.save({"model": model.state_dict(), "manager": manager.state_dict()}, checkpoint_id=str(directory))
    mark_complete(directory)


def restore(root: str, model: nn.Module, manager: Manager) -> None:
    """The newest complete checkpoint under ``root``, if any, loaded before the first quorum."""
    if not Path(root).is_dir():
        return
    newest = newest_complete(root)
    if newest is not None:
        state = {"model": model.state_dict(), "manager": manager.state_dict()}
        dcp.load(state, checkpoint_id=str(newest[1]))
        model.load_state_dict(state["model"])
        manager.load_state_dict(state["manager"])


def hashes(ids: Any) -> list[str]:
    """A short digest of each row, to tell rows apart in the log."""
    return [hashlib.blake2b(row.numpy().tobytes(), digest_size=8).hexdigest() for row in ids]


def own_store() -> Any:
    """A group run as one plain process hosts its own TCPStore, which torchft's Manager joins."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
    return torch.distributed.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cache", help="a beamtok cache directory")
    source.add_argument("--files", help="text files to tokenize on the fly (a glob or brace pattern)")
    parser.add_argument("--tokenizer", help="with --files: a tokenizer.json or its directory")
    parser.add_argument("--seq-len", type=int, default=256, help="with --files: the packed row length")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=50257, help="token ids above this are clamped")
    parser.add_argument("--min-replicas", type=int, default=2, help="the lighthouse's --min_replicas")
    parser.add_argument("--pg-timeout", type=float, default=5.0, help="seconds a collective waits for a dead peer")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep per step (tests: room for kills)")
    parser.add_argument("--checkpoint-dir", help="save a DCP checkpoint here every --checkpoint-every steps")
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--rows-log", help="append each read batch's rows and each step's commit, as JSON lines")
    return parser.parse_args()


if __name__ == "__main__":
    main()

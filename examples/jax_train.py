"""Data-parallel training of a tiny bigram LM in JAX over several processes on CPU, with the
parameters and beamtok's data position saved together by Orbax and resumed on any number of
processes.

Run from the repository root; it starts ``--num-processes`` copies of itself, each joining one
JAX job through ``jax.distributed.initialize`` on localhost:

    .venv/bin/python examples/jax_train.py --num-processes 2 \
        --data 'data/corpus/shakespeare-{00..03}.jsonl' --tokenizer data/tokenizers/gpt2 \
        --seq-len 128 --batch-size 4 --ckpt build/jax-ckpt --save-every 10 --max-steps 30 \
        --rows-log 'build/jax-rows-{rank}.jsonl'

Each process reads its share (``shard_by_rank(process_index, process_count)``) and hands it to
one jitted step as its part of a global batch (``jax.make_array_from_process_local_data``).
Started again with any ``--num-processes`` it resumes from the newest checkpoint: the
parameters and the data, nothing lost or repeated. It stops after global step
``--max-steps`` or at the end of the data's one epoch (a process whose share is used up feeds
padding rows while the others finish); each process logs one JSON line per step to
``--rows-log`` as ``examples/torchrun_train.py`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-processes", type=int, required=True)
    parser.add_argument("--data", nargs="+", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--seq-len", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True, help="rows per process per step")
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--save-every", type=int, required=True)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--rows-log", required=True, help="per-process JSON lines; {rank} is replaced")
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--process-id", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--coordinator", default=None, help=argparse.SUPPRESS)
    return parser.parse_args()


def launch(args: argparse.Namespace) -> int:
    """Start one process per --num-processes and wait for them all (the first failure ends the rest)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    children = [
        subprocess.Popen([sys.executable, *sys.argv, "--process-id", str(i), "--coordinator", f"localhost:{port}"])
        for i in range(args.num_processes)
    ]
    while True:
        codes = [child.poll() for child in children]
        failed = next((code for code in codes if code), None)
        if failed is not None:  # the others would wait for it in the next collective for ever
            for child in children:
                if child.poll() is None:
                    child.kill()
            return failed
        if all(code == 0 for code in codes):
            return 0
        time.sleep(0.1)


def train(args: argparse.Namespace) -> None:
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=args.coordinator, num_processes=args.num_processes, process_id=args.process_id
    )

    import jax.numpy as jnp
    import numpy as np
    import orbax.checkpoint as ocp
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from beamtok import Dataset, load_tokenizer
    from beamtok.training import BeamtokRestore, BeamtokSave

    rank, world = jax.process_index(), jax.process_count()
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rows_sharding = NamedSharding(mesh, PartitionSpec("data"))
    replicated = NamedSharding(mesh, PartitionSpec())

    dataset = (
        Dataset.from_files(args.data)
        .tokenize(args.tokenizer)
        .ensure_bos_eos()
        .concat_chunk(args.seq_len)
        .shard_by_rank(rank, world)
        .batch(args.batch_size)
    )
    pad_id = dataset.spec.pad_id
    vocab = load_tokenizer(args.tokenizer).vocab_size

    key = jax.random.PRNGKey(0)
    params = {"embed": jax.random.normal(key, (vocab, 16)) * 0.02, "out": jnp.zeros((16, vocab))}
    params = jax.device_put(params, replicated)

    def loss_fn(p: dict[str, Any], ids: jax.Array, mask: jax.Array) -> jax.Array:
        logits = p["embed"][ids[:, :-1]] @ p["out"]
        logp = jax.nn.log_softmax(logits)
        picked = jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1)[..., 0]
        weights = mask[:, 1:].astype(jnp.float32)
        return -(picked * weights).sum() / jnp.maximum(weights.sum(), 1.0)

    @jax.jit
    def step(p: dict[str, Any], ids: jax.Array, mask: jax.Array) -> tuple[dict[str, Any], jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(p, ids, mask)
        return jax.tree.map(lambda w, g: w - args.lr * g, p, grads), loss

    manager = ocp.CheckpointManager(Path(args.ckpt).resolve(), options=ocp.CheckpointManagerOptions(create=True))
    start = manager.latest_step()
    state: Any = None
    if start is not None:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, params)
        restored = manager.restore(
            start, args=ocp.args.Composite(params=ocp.args.StandardRestore(abstract), data=BeamtokRestore())
        )
        params, state = restored["params"], restored["data"]
    global_step = start or 0
    if rank == 0:
        print(f"process 0 of {world}: " + (f"resumed at step {start}" if start is not None else "starting"), flush=True)

    iterator = dataset.iter() if state is None else dataset.iter_merged(state)  # every process's state
    log_path = Path(args.rows_log.replace("{rank}", str(rank)))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "a")
    saved_at = global_step

    def save() -> None:
        composite = ocp.args.Composite(params=ocp.args.StandardSave(params), data=BeamtokSave(iterator.state_dict()))
        manager.save(global_step, args=composite)
        manager.wait_until_finished()

    while args.max_steps is None or global_step < args.max_steps:
        batch = next(iterator, None)
        if not multihost_utils.process_allgather(np.array([batch is not None])).any():
            break
        ids = np.full((args.batch_size, args.seq_len), pad_id, dtype=np.int32)
        mask = np.zeros((args.batch_size, args.seq_len), dtype=np.int32)
        rows = [[-1, -1]] * args.batch_size
        if batch is not None:
            have = len(batch["input_ids"])
            ids[:have], mask[:have] = batch["input_ids"], batch["loss_mask"]
            rows = [[int(s), int(i)] for s, i in zip(batch["shard"], batch["index"])] + rows[have:]
        global_ids = jax.make_array_from_process_local_data(rows_sharding, ids)
        global_mask = jax.make_array_from_process_local_data(rows_sharding, mask)
        params, loss = step(params, global_ids, global_mask)
        global_step += 1
        line = {"step": global_step, "rank": rank, "world": world, "restart": 0, "loss": float(loss), "rows": rows}
        log.write(json.dumps(line) + "\n")
        log.flush()
        if global_step % args.save_every == 0:
            save()
            saved_at = global_step
    if saved_at != global_step:
        save()
    manager.close()
    log.close()
    if rank == 0:
        print(f"stopped at step {global_step} on {world} processes", flush=True)


def main() -> None:
    args = parse_args()
    if args.process_id is None:
        raise SystemExit(launch(args))
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    try:
        train(args)
    except BaseException:
        # jax.distributed's exit waits for every process at a barrier, which the others, waiting
        # for this one in a collective, never reach: a failed process leaves at once instead
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    main()

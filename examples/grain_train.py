"""A MaxText-style JAX training loop reading a beamtok cache through grain: grain's DataLoader
(its sampler, worker processes and checkpoint) over ``beamtok._src.grain_source.CacheDataSource``,
the parameters and grain's iterator saved together by Orbax, and resumed exactly.

Run from the repository root (the cache is built first if ``--cache`` holds none):

    .venv/bin/python examples/grain_train.py --cache build/grain-cache \
        --data 'data/corpus/shakespeare-{00..03}.jsonl' --tokenizer data/tokenizers/gpt2 \
        --seq-len 128 --batch-size 8 --workers 2 --ckpt build/grain-ckpt --save-every 10 \
        --max-steps 30 --rows-log build/grain-rows.jsonl

Each process reads its share of grain's global order (``ShardByJaxProcess``), shuffled per
epoch by grain's seed. Started again, it resumes from the newest checkpoint: the parameters,
and grain's iterator at the record after the last one trained on. Each step logs one JSON line
(``step``, and the ``shard``/``index`` of each row) to ``--rows-log``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", required=True, help="a packed beamtok cache (built here from --data if missing)")
    parser.add_argument("--data", nargs="+", default=None)
    parser.add_argument("--tokenizer", required=True, help="the cache's tokenizer (its vocabulary sizes the model)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, required=True, help="rows per process per step")
    parser.add_argument("--workers", type=int, default=0, help="grain worker processes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--save-every", type=int, required=True)
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--rows-log", required=True)
    parser.add_argument("--lr", type=float, default=0.5)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # grain reads absl flags; a MaxText job parses them in absl.app

    import grain.python as gp
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    from beamtok import Dataset, load_tokenizer
    from beamtok.training import CacheDataSource

    if not (Path(args.cache) / "manifest.json").exists():
        if not args.data:
            raise SystemExit(f"{args.cache} holds no cache: give --data to build one")
        Dataset.from_files(args.data).tokenize(args.tokenizer).ensure_bos_eos().concat_chunk(args.seq_len).cache(
            args.cache, progress=False
        )
    source = CacheDataSource(args.cache)
    loader = gp.DataLoader(
        data_source=source,
        sampler=gp.IndexSampler(
            len(source),
            shard_options=gp.ShardByJaxProcess(drop_remainder=True),
            shuffle=True,
            seed=args.seed,
            num_epochs=1,
        ),
        operations=[gp.Batch(args.batch_size, drop_remainder=True)],
        worker_count=args.workers,
    )
    iterator = iter(loader)
    vocab = load_tokenizer(args.tokenizer).vocab_size

    key = jax.random.PRNGKey(0)
    params = {"embed": jax.random.normal(key, (vocab, 16)) * 0.02, "out": jnp.zeros((16, vocab))}

    def loss_fn(p: dict[str, Any], ids: jax.Array, mask: jax.Array) -> jax.Array:
        logp = jax.nn.log_softmax(p["embed"][ids[:, :-1]] @ p["out"])
        picked = jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1)[..., 0]
        weights = mask[:, 1:].astype(jnp.float32)
        return -(picked * weights).sum() / jnp.maximum(weights.sum(), 1.0)

    @jax.jit
    def step(p: dict[str, Any], ids: jax.Array, mask: jax.Array) -> tuple[dict[str, Any], jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(p, ids, mask)
        return jax.tree.map(lambda w, g: w - args.lr * g, p, grads), loss

    manager = ocp.CheckpointManager(
        Path(args.ckpt).resolve(),
        item_handlers={"params": ocp.StandardCheckpointHandler(), "data": gp.PyGrainCheckpointHandler()},
        options=ocp.CheckpointManagerOptions(create=True),
    )
    start = manager.latest_step()
    if start is not None:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, params)
        restored = manager.restore(
            start,
            args=ocp.args.Composite(
                params=ocp.args.StandardRestore(abstract), data=gp.PyGrainCheckpointRestore(iterator)
            ),
        )
        params = restored["params"]
    global_step = start or 0
    print("resumed at step", start if start is not None else "none (starting)", flush=True)
    Path(args.rows_log).parent.mkdir(parents=True, exist_ok=True)
    with open(args.rows_log, "a") as log:
        while global_step < args.max_steps:
            batch = next(iterator, None)
            if batch is None:
                break
            params, loss = step(params, jnp.asarray(batch["input_ids"]), jnp.asarray(batch["loss_mask"]))
            global_step += 1
            rows = [[int(s), int(i)] for s, i in zip(batch["shard"], batch["index"])]
            log.write(json.dumps({"step": global_step, "loss": float(loss), "rows": rows}) + "\n")
            if global_step % args.save_every == 0:
                composite = ocp.args.Composite(
                    params=ocp.args.StandardSave(params), data=gp.PyGrainCheckpointSave(iterator)
                )
                manager.save(global_step, args=composite)
                manager.wait_until_finished()
    print(f"stopped at step {global_step}", flush=True)


if __name__ == "__main__":
    main()

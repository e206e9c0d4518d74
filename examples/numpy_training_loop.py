"""A training loop on numpy batches (no torch): the shape a JAX or numpy training step takes.

A hashed bigram model (token id mod BUCKETS predicts the next id mod BUCKETS) trains with plain
softmax gradient steps on packed rows, never across the pieces of a row. Every CHECKPOINT
steps it saves the parameters (.npz) and the beamtok state (JSON) together; run it again with
``--resume`` and it continues from the last checkpoint with exactly the batches an
uninterrupted run would have seen. Run from the repository root:

    .venv/bin/python examples/numpy_training_loop.py --steps 40 --out /tmp/run
    .venv/bin/python examples/numpy_training_loop.py --steps 60 --out /tmp/run --resume
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from beamtok import Dataset

BUCKETS = 512
CHECKPOINT = 10


def dataset() -> Dataset:
    return (
        Dataset.from_files("data/corpus/shakespeare-{00..03}.jsonl")
        .tokenize("data/tokenizers/gpt2")
        .ensure_bos_eos()
        .concat_chunk(128)
        .shuffle(window=32, seed=0)
        .batch(8)  # numpy arrays: what jax.numpy takes as is
    )


def pairs(batch: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(current, next) bucket pairs inside one piece of a row, where the next token is trained."""
    same_piece = (batch["segment_ids"][:, 1:] == batch["segment_ids"][:, :-1]) & (batch["segment_ids"][:, 1:] > 0)
    keep = same_piece & (batch["loss_mask"][:, 1:] == 1)
    ids = batch["input_ids"].astype(np.int64) % BUCKETS
    return ids[:, :-1][keep], ids[:, 1:][keep]


def step(weights: np.ndarray, batch: dict[str, np.ndarray], lr: float = 0.5) -> float:
    """One gradient step on the mean cross entropy; returns the loss before it."""
    current, target = pairs(batch)
    logits = weights[current]
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    loss = float(-np.log(probs[np.arange(len(target)), target]).mean())
    probs[np.arange(len(target)), target] -= 1.0
    np.add.at(weights, current, -lr * probs / len(target))
    return loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, required=True, help="train until this step")
    parser.add_argument("--out", type=Path, required=True, help="checkpoint directory")
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    weights, first, state = np.zeros((BUCKETS, BUCKETS)), 0, None
    if args.resume:
        saved = json.loads((args.out / "checkpoint.json").read_text())
        weights, first, state = np.load(args.out / "weights.npz")["weights"], saved["step"], saved["data"]
    it = dataset().iter(state)
    losses = {}
    for number in range(first, args.steps):
        losses[number] = step(weights, next(it))
        if (number + 1) % CHECKPOINT == 0:
            np.savez(args.out / "weights.npz", weights=weights)
            (args.out / "checkpoint.json").write_text(json.dumps({"step": number + 1, "data": it.state_dict()}))
    with open(args.out / "losses.jsonl", "a") as log:
        for number, loss in losses.items():
            log.write(json.dumps({"step": number, "loss": loss}) + "\n")
    print(f"steps {first}..{args.steps - 1}: loss {losses[first]:.3f} -> {losses[args.steps - 1]:.3f}")


if __name__ == "__main__":
    main()

"""A Trainer job run by tests/distributed/test_accelerate.py under ``accelerate launch --num_processes N``:
a tiny GPT-2 trained on a beamtok stream with BeamtokCallback, checkpointing every few steps,
optionally resumed from a checkpoint. Every process logs, per optimizer step, the provenance of
the rows it trained on to ``--log`` (``{rank}`` replaced) as JSON lines."""

from __future__ import annotations

import argparse
import gc
import json
import time
from typing import Any

import torch
import torch.distributed as dist
import transformers

from beamtok import Dataset, load_tokenizer
from beamtok._src.trainer import BeamtokCallback, PackedCollator


class ProvenanceCollator(PackedCollator):
    """PackedCollator, plus each row's (shard, index) for the log."""

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        batch = super().__call__(examples)
        batch["provenance"] = torch.tensor([[int(e["shard"]), int(e["index"])] for e in examples])
        return batch


class LoggingTrainer(transformers.Trainer):
    def __init__(self, *args: Any, log: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rows_log = open(log.replace("{rank}", str(self.args.process_index)), "a")

    def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        rows = inputs.pop("provenance").tolist()
        line = {
            "step": self.state.global_step + 1,
            "rank": self.args.process_index,
            "world": self.args.world_size,
            "restart": 0,
            "rows": rows,
        }
        self.rows_log.write(json.dumps(line) + "\n")
        self.rows_log.flush()
        return super().compute_loss(model, inputs, *args, **kwargs)


def main() -> None:
    train_until_max_steps()
    # The Trainer and its DDP model are freed (the function returned) before the process group,
    # with gloo's threads idle: freed at interpreter exit instead, a gloo thread can be torn down
    # while it still frees a collective's tensors ("terminate called without an active exception")
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def train_until_max_steps() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--rows-log", required=True)
    args = parser.parse_args()
    ds = Dataset.from_files(args.data).tokenize(args.tokenizer).ensure_bos_eos().concat_chunk(32).repeat()
    train = ds.to_torch()
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            vocab_size=load_tokenizer(args.tokenizer).vocab_size, n_layer=1, n_head=2, n_embd=16, n_positions=32
        )
    )
    settings = transformers.TrainingArguments(
        output_dir=args.out, max_steps=args.max_steps, per_device_train_batch_size=2, save_steps=3, report_to=[],
        use_cpu=True, logging_steps=1000, dataloader_num_workers=0, seed=0,
    )  # fmt: skip
    trainer = LoggingTrainer(
        model=model,
        args=settings,
        train_dataset=train,
        data_collator=ProvenanceCollator(),
        callbacks=[BeamtokCallback(train)],
        log=args.rows_log,
    )
    trainer.train(resume_from_checkpoint=args.resume)
    trainer.rows_log.close()
    if dist.is_initialized():
        dist.barrier()
        time.sleep(0.2)  # gloo's threads free the last collectives' work objects, which takes the GIL


if __name__ == "__main__":
    main()

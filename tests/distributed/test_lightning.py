"""LightningLoader under PyTorch Lightning's real Trainer: a checkpoint its ModelCheckpoint
writes in the middle of a run resumes on the very next batch (the run resumed equals one run
straight through), with and without DataLoader workers, and at the end of the data. A plain
stateful loader loses the batch Lightning's training loop fetched ahead: the reason
LightningLoader exists, kept as a test so a Lightning that stops fetching ahead is noticed."""

from __future__ import annotations

from pathlib import Path

import pytest

from beamtok import ConfigError, Dataset

from conftest import CORPUS

torch = pytest.importorskip("torch")
pl = pytest.importorskip("pytorch_lightning")

from beamtok._src.distributed.lightning_loader import LightningLoader  # noqa: E402
from beamtok._src.distributed.torch_loader import DistributedLoader  # noqa: E402

VOCAB = 50257


def stream() -> Dataset:
    return (
        Dataset.from_files(str(CORPUS / "shakespeare-{00..01}.jsonl"))
        .tokenize(str(CORPUS.parent / "tokenizers" / "gpt2"))
        .ensure_bos_eos()
        .concat_chunk(65)
        .batch(4, tensors="torch")
    )


class Model(pl.LightningModule):
    """A model that notes the first token of every row it trains on."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 4)
        self.head = torch.nn.Linear(4, VOCAB)
        self.seen: list[list[int]] = []

    def training_step(self, batch: dict, index: int) -> torch.Tensor:
        ids = batch["input_ids"].long()
        self.seen.append(ids[:, 0].tolist())
        logits = self.head(self.embed(ids[:, :-1]))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Data(pl.LightningDataModule):
    def __init__(self, make_loader) -> None:
        super().__init__()
        self.make_loader = make_loader

    def train_dataloader(self):
        return self.make_loader()


def fit(root: Path, steps: int, make_loader, ckpt: str | None = None, every: int | None = None) -> list[list[int]]:
    callbacks = [pl.callbacks.ModelCheckpoint(dirpath=root, every_n_train_steps=every, save_top_k=-1)] if every else []
    trainer = pl.Trainer(
        max_steps=steps,
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=bool(every),
        callbacks=callbacks,
        default_root_dir=str(root),
    )
    model = Model()
    trainer.fit(model, Data(make_loader), ckpt_path=ckpt)
    return model.seen


def checkpoint_at(root: Path, step: int) -> str:
    (found,) = root.glob(f"*step={step}.ckpt")
    return str(found)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_checkpoint_in_the_middle_resumes_on_the_next_batch(tmp_path, workers):
    make = lambda: LightningLoader(stream(), even=None, num_workers=workers)  # noqa: E731
    straight = fit(tmp_path / "straight", 6, make)
    first = fit(tmp_path / "first", 6, make, every=3)
    resumed = fit(tmp_path / "again", 6, make, ckpt=checkpoint_at(tmp_path / "first", 3))
    assert first == straight and len(straight) == 6
    assert resumed == straight[3:]


def test_a_checkpoint_at_the_end_of_the_data_resumes_with_nothing_left(tmp_path):
    make = lambda: LightningLoader(stream().take(3), even=None)  # noqa: E731 (3 batches)
    whole = fit(tmp_path / "whole", 100, make, every=3)
    assert len(whole) == 3
    assert fit(tmp_path / "again", 100, make, ckpt=checkpoint_at(tmp_path / "whole", 3)) == []


def test_the_workers_stop_when_the_fit_ends_and_the_position_is_kept(tmp_path):
    """Lightning resets its train loader when a fit ends: the workers stop then, not when the
    collector reaches the trainer's reference cycles (each worker would wait 5 s there), and
    the loader's state still resumes on the batch after the last one trained on."""
    straight = fit(tmp_path / "straight", 6, lambda: LightningLoader(stream(), even=None, num_workers=2))
    first = LightningLoader(stream(), even=None, num_workers=2)
    assert fit(tmp_path / "first", 3, lambda: first) == straight[:3]
    workers = first.loader._iterator._workers
    assert len(workers) == 2 and not any(w.is_alive() for w in workers)
    state = first.state_dict()
    resumed = LightningLoader(stream(), even=None, num_workers=2)
    resumed.load_state_dict(state)
    assert fit(tmp_path / "again", 3, lambda: resumed) == straight[3:]


def test_a_plain_stateful_loader_loses_the_batch_fetched_ahead(tmp_path):
    make = lambda: DistributedLoader(stream(), even=None)  # noqa: E731
    straight = fit(tmp_path / "straight", 7, make)
    fit(tmp_path / "first", 6, make, every=3)
    resumed = fit(tmp_path / "again", 6, make, ckpt=checkpoint_at(tmp_path / "first", 3))
    assert resumed == straight[4:7]  # batch 4 was fetched ahead when step 3 was saved: never trained on


def test_fetched_ahead_must_be_a_whole_number():
    with pytest.raises(ConfigError, match="fetched_ahead"):
        LightningLoader(stream(), fetched_ahead=-1, even=None)

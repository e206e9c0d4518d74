"""BeamtokDataLoader in torchtitan's parts (its dataloader config, optimizers, LR schedulers and
DCP checkpoint manager) under torchrun: saved by torchtitan's checkpoint manager at one
data-parallel degree and resumed at another, every row trained on once. torchtitan's own
loader refuses that resume ("dataloader resharding is not supported yet"). Also the batch
convention: next-token labels, -100 where no loss is taken, positions per document."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from beamtok import ConfigError, Dataset

from conftest import ROOT, real_paragraphs, run_torchrun, small_vocab_tokenizer, write_jsonl

torch = pytest.importorskip("torch")
pytest.importorskip("torchtitan")

from beamtok._src.distributed.torchtitan_loader import BeamtokDataLoader, torchtitan_batch  # noqa: E402

JOB = str(Path(__file__).resolve().parent / "torchtitan_job.py")


def torchrun(nproc: int, *args: str) -> None:
    from beamtok import load_tokenizer

    run_torchrun(nproc, JOB, "--vocab", str(load_tokenizer(small_vocab_tokenizer()).vocab_size), *args)


def data_root(root: Path) -> Path:
    (root / "data").mkdir()
    paragraphs = real_paragraphs(60)
    for i in range(4):
        write_jsonl(root / "data" / f"part-{i}.jsonl", [{"text": p} for p in paragraphs[i * 15 : i * 15 + 8 + i]])
    (root / "data.yaml").write_text(
        f"tokenizer: {small_vocab_tokenizer()}\nseq_len: 33\n"
        "datasets:\n  parts:\n    urls: ['data/part-*.jsonl']\n"
        "train:\n  weights: {parts: 1.0}\n"
    )
    return root


def stream(root: Path) -> Dataset:
    from beamtok import load_config

    return load_config(str(root / "data.yaml")).train


def trained(root: Path, phase: str, world: int) -> list[tuple[int, ...]]:
    return [tuple(row) for rank in range(world) for row in json.loads((root / f"rows-{phase}-{rank}.json").read_text())]


@pytest.mark.parametrize(("old", "new", "workers"), [(2, 3, 1)])
def test_saved_by_torchtitan_and_resumed_on_another_data_parallel_degree(tmp_path, old, new, workers):
    """One change of degree, up, with DataLoader workers: what this adds is torchtitan's own
    checkpoint manager carrying the loader. The way down and to one rank runs through the same
    gathered state (``test_dcp_checkpoint.py`` resumes 3 ranks on 2, and
    ``tests/stream/ranks/test_world_size_change.py`` every change in process)."""
    root = data_root(tmp_path)
    torchrun(old, "--root", str(root), "--phase", "save", "--steps", "3", "--workers", str(workers))
    assert (root / "checkpoint" / "step-3").is_dir()  # torchtitan's own layout
    torchrun(new, "--root", str(root), "--phase", "resume", "--steps", "3", "--workers", str(workers))
    before, after = trained(root, "save", old), trained(root, "resume", new)
    assert len(before) == old * 3 * 2 and after
    want = Counter(tuple(int(t) for t in row["input_ids"][:-1]) for row in stream(root))
    assert Counter(before) + Counter(after) == want  # every row once: none lost, none repeated


def test_the_batch_is_torchtitans_convention():
    """Inputs and next-token labels of one packed row: -100 at padding, under a zero loss
    mask, and where the next token starts another document; positions restart per document."""
    batch = {
        "input_ids": np.array([[5, 6, 7, 8, 9, 0, 0]]),
        "segment_ids": np.array([[1, 1, 1, 2, 2, 0, 0]]),
        "position_ids": np.array([[0, 1, 2, 0, 1, 0, 0]]),
        "loss_mask": np.array([[1, 1, 0, 1, 1, 0, 0]]),
    }
    inputs, labels = torchtitan_batch(batch)
    assert inputs["input"].tolist() == [[5, 6, 7, 8, 9, 0]]
    assert inputs["positions"].tolist() == [[0, 1, 2, 0, 1, 0]]
    assert labels.tolist() == [[6, -100, -100, 9, -100, -100]]


def test_a_stream_that_batches_itself_or_rows_of_another_length_are_refused(tmp_path):
    root = data_root(tmp_path)
    config = BeamtokDataLoader.Config(dataset_path=str(root / "data.yaml"), even=None)
    with pytest.raises(ConfigError, match=r"without \.batch\(\)"):
        config.build(dp_world_size=1, dp_rank=0, local_batch_size=2, stream=stream(root).batch(2))
    loader = config.build(dp_world_size=1, dp_rank=0, local_batch_size=2, seq_len=64)
    with pytest.raises(ConfigError, match=r"concat_chunk\(65\)"):
        next(iter(loader))
    with pytest.raises(ConfigError, match="dataset_path"):
        BeamtokDataLoader.Config().build(dp_world_size=1, dp_rank=0, local_batch_size=2)


def test_a_data_config_that_batches_is_batched_by_local_batch_size():
    config = BeamtokDataLoader.Config(dataset_path=str(ROOT / "examples" / "data.yaml"), even=None)
    loader = config.build(dp_world_size=1, dp_rank=0, tokenizer=None, seq_len=1023, local_batch_size=3)
    inputs, labels = next(iter(loader))  # the file says batch: 8 and seq_len: 1024
    assert inputs["input"].shape == labels.shape == (3, 1023)
    loader.loader.close()

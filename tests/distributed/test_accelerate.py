"""The Hugging Face Trainer with BeamtokCallback under ``accelerate launch`` on several CPU
processes: a run on 2 processes checkpoints, a restart on 3 resumes from a checkpoint, and
counting the first run's steps up to the checkpoint the second resumed from, the rows trained
are the stream's first rows, each exactly once. The Trainer in one process (no process group)
resumes in ``test_trainer.py``; fewer ranks than saved, in ``test_dcp_checkpoint.py``."""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from beamtok import Dataset

from conftest import ROOT, real_paragraphs, run_group, small_vocab_tokenizer, write_jsonl

pytest.importorskip("torch")
pytest.importorskip("accelerate")
transformers = pytest.importorskip("transformers")

from torchrun_runs import read_rows_log, starts_of, trained_rows  # noqa: E402

JOB = str(Path(__file__).resolve().parent / "accelerate_job.py")


def launch(processes: int, data: str, root: Path, name: str, max_steps: int, resume: str | None = None) -> list[dict]:
    # --multi_gpu is accelerate's multi-process launcher; with no GPU and use_cpu=True it runs gloo on CPU
    multi = ["--multi_gpu"] if processes > 1 else ["--cpu"]
    command = [
        shutil.which("accelerate") or str(Path(sys.executable).parent / "accelerate"),
        "launch",
        *multi,
        "--num_processes",
        str(processes),
    ]
    command += [
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        JOB,
        "--data",
        data,
        "--tokenizer",
        small_vocab_tokenizer(),
    ]
    command += [
        "--out",
        str(root / "out"),
        "--max-steps",
        str(max_steps),
        "--rows-log",
        str(root / f"{name}-{{rank}}.jsonl"),
    ]
    command += ["--resume", resume] if resume else []
    done = run_group(command, timeout=300, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-5000:]
    return read_rows_log(str(root / f"{name}-{rank}.jsonl") for rank in range(processes))


def test_exactly_once_across_restarts_on_other_process_counts(tmp_path):
    paragraphs = real_paragraphs(120)
    for i in range(4):
        write_jsonl(tmp_path / f"part-{i}.jsonl", [{"text": p} for p in paragraphs[i * 30 : (i + 1) * 30]])
    data = str(tmp_path / "part-{0..3}.jsonl")
    first = launch(2, data, tmp_path, "first", max_steps=8)  # checkpoints at steps 3 and 6; steps 7-8 are redone
    second = launch(3, data, tmp_path, "second", max_steps=11, resume=str(tmp_path / "out" / "checkpoint-6"))
    assert {line["world"] for line in second} == {3} and min(line["step"] for line in second) == 7
    assert max(line["step"] for line in second) == 11
    trained = trained_rows(starts_of(first) + starts_of(second))
    stream = Dataset.from_files(data).tokenize(small_vocab_tokenizer()).ensure_bos_eos().concat_chunk(32)
    expected = [(int(e["shard"]), int(e["index"])) for e, _ in zip(stream, range(2 * 6 * 2 + 3 * 5 * 2))]
    assert len(set(expected)) == len(expected)  # within one epoch: provenance names a row once
    assert max(trained.values()) == 1 and Counter(trained) == Counter(expected)

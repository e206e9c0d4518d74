"""examples/grain_train.py, a MaxText-style JAX loop over a cache through grain: stopped at
a step and started again, it trains on exactly the rows of one uninterrupted run, with grain
worker processes, its checkpoint saved by Orbax beside the parameters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("grain.python")
pytest.importorskip("orbax.checkpoint")

SCRIPT = str(ROOT / "examples" / "grain_train.py")


def run(tmp_path, cache, ckpt, log, max_steps, workers):
    command = [
        sys.executable, SCRIPT, "--cache", str(cache), "--data", "data/corpus/shakespeare-{00..01}.jsonl",
        "--tokenizer", "data/tokenizers/gpt2", "--seq-len", "64", "--batch-size", "4", "--workers", str(workers),
        "--ckpt", str(ckpt), "--save-every", "5", "--max-steps", str(max_steps), "--rows-log", str(log),
    ]  # fmt: skip
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def rows_of(log):
    return {line["step"]: line["rows"] for line in map(json.loads, log.read_text().splitlines())}


@pytest.mark.parametrize("workers", [2])
def test_a_stopped_run_resumes_on_the_rows_of_an_uninterrupted_one(tmp_path, workers):
    cache = tmp_path / "cache"
    whole = tmp_path / "whole.jsonl"
    run(tmp_path, cache, tmp_path / "ckpt-whole", whole, 16, workers)
    parts = tmp_path / "parts.jsonl"
    assert "starting" in run(tmp_path, cache, tmp_path / "ckpt", parts, 12, workers)  # saved at 5 and 10
    assert "resumed at step 10" in run(tmp_path, cache, tmp_path / "ckpt", parts, 16, workers)
    logged = [json.loads(line) for line in parts.read_text().splitlines()]
    assert [line["step"] for line in logged] == [*range(1, 13), *range(11, 17)]  # steps 11 and 12 ran twice
    resumed = rows_of(parts)  # the second run's steps 11-16, as a restart after a crash would train them
    assert resumed == rows_of(whole)
    trained = [tuple(r) for s in range(1, 17) for r in resumed[s]]
    assert len(trained) == len(set(trained)) == 64

"""examples/numpy_training_loop.py trains on numpy batches with torch made unimportable,
checkpoints, and resumes with exactly the losses of an uninterrupted run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

NO_TORCH = "import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
SCRIPT = str(ROOT / "examples" / "numpy_training_loop.py")


def run(*args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", NO_TORCH, SCRIPT, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr


def losses(path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in map(json.loads, path.read_text().splitlines())}


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_resumed_run_has_the_uninterrupted_losses(tmp_path):
    run("--steps", "30", "--out", str(tmp_path / "full"))
    run("--steps", "15", "--out", str(tmp_path / "split"))  # stops mid-way: last checkpoint at step 10
    run("--steps", "30", "--out", str(tmp_path / "split"), "--resume")
    full, split = losses(tmp_path / "full" / "losses.jsonl"), losses(tmp_path / "split" / "losses.jsonl")
    assert list(full) == list(range(30)) and full[29] < full[0]  # it learns
    assert all(split[n] == full[n] for n in range(10, 30))  # steps 10-14 ran twice; the second time as the first

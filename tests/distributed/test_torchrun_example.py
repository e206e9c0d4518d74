"""examples/torchrun_train.py run as the docs run it (docs/checkpoints.md; a 6,000-token tokenizer for GPT-2's, see
conftest.small_vocab_tokenizer), under torchrun (gloo, CPU): on the
same number of ranks a resume continues exactly (the same rows and the same loss at every step as an uninterrupted run);
then resumed on another number of ranks past a checkpoint cut off mid-write; a rank SIGKILLed mid-run and the job resumed
on fewer ranks, torchrun --max-restarts restarting it, then resumed on more; every row of the data trained exactly once,
counting each start's steps up to the checkpoint the next start resumed from. One file cut into
ranges over 2 ranks with workers and resumed on 3 is test_dcp_checkpoint.py's ``one_file``
kind; here, a file that cannot be cut is refused before training."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from beamtok import Dataset

from conftest import ROOT, paragraph_files, small_vocab_tokenizer

pytest.importorskip("torch")
pytest.importorskip("torchdata")

from torchrun_runs import TorchrunJob, read_rows_log, starts_of, trained_rows

SCRIPT = str(ROOT / "examples" / "torchrun_train.py")
SEQ_LEN = 32


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    return paragraph_files(tmp_path_factory.mktemp("torchrun-data"), 8, 20)


@pytest.fixture(scope="module")
def every_row(data) -> Counter:
    ds = Dataset.from_files(data).tokenize(small_vocab_tokenizer()).ensure_bos_eos().concat_chunk(SEQ_LEN)
    return Counter((int(e["shard"]), int(e["index"])) for e in ds)


class Runs:
    """The runs of one training job (one checkpoint directory), each with its own rows logs."""

    def __init__(self, root: Path, data: str) -> None:
        self.root, self.data, self.count = root, data, 0
        self.logs: list[tuple[str, int]] = []

    def start(
        self, nproc: int, *, max_steps: int | None = None, save_every: int = 3, max_restarts: int = 0, workers: int = 1
    ) -> TorchrunJob:
        self.count += 1
        log = str(self.root / f"run{self.count}-rows-{{rank}}.jsonl")
        self.logs.append((log, nproc))
        args = [
            "--data",
            self.data,
            "--tokenizer",
            small_vocab_tokenizer(),
            "--seq-len",
            str(SEQ_LEN),
            "--batch-size",
            "4",
        ]
        args += [
            "--ckpt",
            str(self.root / "ckpt"),
            "--save-every",
            str(save_every),
            "--rows-log",
            log,
            "--num-workers",
            str(workers),
        ]
        args += ["--max-steps", str(max_steps)] if max_steps is not None else []
        return TorchrunJob(nproc, SCRIPT, args, max_restarts=max_restarts, cwd=str(ROOT))

    def run(self, nproc: int, **options) -> str:
        done = self.start(nproc, **options).wait(timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-5000:]
        return done.stdout

    def lines(self, run: int) -> list[dict]:
        log, nproc = self.logs[run]
        return read_rows_log(log.replace("{rank}", str(r)) for r in range(nproc))

    def trained(self) -> Counter:
        starts = [start for run in range(len(self.logs)) for start in starts_of(self.lines(run))]
        return trained_rows(starts)

    def kill_when(self, job: TorchrunJob, step: int, rank_index: int) -> None:
        """SIGKILL one rank once any rank has logged ``step``; the job then fails."""
        deadline = time.monotonic() + 240
        while not any(line["step"] >= step for line in self.lines(len(self.logs) - 1)):
            assert job.process.poll() is None, "the job ended before the step to kill at"
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.05)
        assert job.kill_rank(rank_index) is not None
        done = job.wait(timeout=120)
        assert done.returncode != 0


def assert_exactly_once(trained: Counter, every_row: Counter) -> None:
    repeated = [row for row, n in trained.items() if n > 1]
    assert not repeated, f"trained twice: {repeated[:8]}"
    assert set(trained) == set(every_row), (
        f"lost: {sorted(set(every_row) - set(trained))[:8]}, unknown: {sorted(set(trained) - set(every_row))[:8]}"
    )


def test_resumed_exactly_on_the_same_ranks_then_on_another_number_past_a_checkpoint_cut_off_mid_write(
    tmp_path, data, every_row
):
    runs = Runs(tmp_path, data)
    runs.run(2, max_steps=7, save_every=3, workers=2)  # checkpoints at 3, 6 and 7 (the last step)
    for later in ("step_00000006", "step_00000007"):  # as a job killed after step 3's checkpoint leaves it
        shutil.rmtree(tmp_path / "ckpt" / later)
    assert "resumed at step 3" in runs.run(2, max_steps=7, save_every=3, workers=2)  # from a checkpoint taken mid-run

    def by_step(lines):
        return {(line["step"], line["rank"]): (line["rows"], line["loss"]) for line in lines}

    uninterrupted, resumed = by_step(runs.lines(0)), by_step(runs.lines(1))
    assert sorted(resumed) == [(s, r) for s in range(4, 8) for r in range(2)]
    for key, (rows, loss) in resumed.items():
        assert rows == uninterrupted[key][0], key
        assert loss == uninterrupted[key][1], key  # the model and optimizer came back exactly too

    newest = tmp_path / "ckpt" / "step_00000007"
    (newest / "COMPLETE").unlink()  # as a job killed inside dcp.save leaves it
    for part in newest.glob("*.distcp"):
        part.write_bytes(part.read_bytes()[:100])
    assert "resumed at step 6" in runs.run(3)  # to the end of the epoch, from the newest whole checkpoint
    assert_exactly_once(runs.trained(), every_row)
    assert runs.lines(2)[-1]["world"] == 3


def test_killed_ranks_resume_on_fewer_and_on_more_ranks_and_torchrun_restarts_them(tmp_path, data, every_row):
    runs = Runs(tmp_path, data)
    runs.kill_when(runs.start(3, save_every=2), step=5, rank_index=1)
    # on 2 ranks with 2 DataLoader workers each, a rank killed: torchrun --max-restarts starts
    # both again from the newest checkpoint, and the run stops part way through the epoch
    first = runs.lines(0)[-1]["step"]
    job = runs.start(2, save_every=2, workers=2, max_restarts=1, max_steps=first + 10)
    deadline = time.monotonic() + 240
    while not any(line["step"] >= first + 4 for line in runs.lines(1)):
        assert time.monotonic() < deadline and job.process.poll() is None
        time.sleep(0.05)
    job.kill_rank(0)
    done = job.wait(timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    starts = starts_of(runs.lines(1))
    assert len(starts) == 2 and starts[1].first_step > starts[0].first_step  # restarted from a checkpoint of this run
    runs.run(3, save_every=2)  # on more ranks than the restarted job
    assert_exactly_once(runs.trained(), every_row)
    assert max(line["step"] for line in runs.lines(0)) > 4  # the kill landed after a checkpoint, with steps to redo


def test_a_users_mistake_is_refused_in_one_line_before_training(tmp_path):
    """Data that is not there: on 2 ranks the job stops at once, saying why in one line (no
    rank's traceback), before any DataLoader worker or step. (A compressed file, which cannot
    be cut into ranges, is no longer a mistake: DistributedLoader's split="auto" reads it by
    examples, tests/distributed/test_few_shards.py.)"""
    missing = tmp_path / "missing-{0..1}.jsonl"
    runs = Runs(tmp_path, str(missing))
    done = runs.start(2, workers=2).wait(timeout=300)
    assert done.returncode != 0
    said = {line for line in done.stderr.splitlines() if line.startswith("torchrun_train.py: ")}
    assert said == {f"torchrun_train.py: {tmp_path / 'missing-0.jsonl'}: file not found"}
    assert "ConfigError" not in done.stderr and "beamtok/" not in done.stderr
    assert not (tmp_path / "ckpt").exists() or not any((tmp_path / "ckpt").iterdir())

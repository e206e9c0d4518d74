"""torchft on this machine: a lighthouse and three one-process replica groups (gloo) train
``examples/torchft_train.py`` over a cache and over files tokenized on the fly; groups are
SIGKILLed mid-run (one and started again, two at once and started again, one for good) while
the others keep stepping. Every row of the data is trained in exactly one committed step,
checked from the per-group logs of each step's rows."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

pytest.importorskip("torchft")

from beamtok import ConfigError, Dataset, load_tokenizer
from beamtok._src.distributed.torchft_loader import torchft_version_warning
from beamtok.training import TorchftLoader, newest_complete

from conftest import CORPUS, TOKENIZER_DIR, cache_without_beam
from torchft_compose_job import composed
from torchft_runs import TorchftJob, lost_and_repeated, read_log, trained

BATCH = 8


def files_dataset(pattern: str) -> Dataset:
    return Dataset.from_files(pattern).tokenize(load_tokenizer(str(TOKENIZER_DIR))).ensure_bos_eos().concat_chunk(128)


def row_hashes(ds: Dataset) -> list[str]:
    """Every row of the stream once, hashed as the example logs them."""
    return row_hashes_of(ds.batch(BATCH, tensors="torch"))


def row_hashes_of(batches: Dataset) -> list[str]:
    return [
        hashlib.blake2b(row.numpy().tobytes(), digest_size=8).hexdigest()
        for batch in batches.iter()
        for row in batch["input_ids"]
    ]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    where = str(tmp_path_factory.mktemp("torchft") / "cache")
    cache_without_beam(files_dataset(str(CORPUS / "shakespeare-{00..01}.jsonl")), where, row_group_rows=64)
    return where


def kill_and_rejoin(job: TorchftJob, every: int) -> None:
    """One group killed and started again; two at once, started again; one killed for good."""
    job.start()
    job.wait_steps(every)
    job.kill(2)
    job.start_group(2)
    job.wait_rejoined(2)
    job.wait_steps(job.committed_steps() + every)
    job.kill(0, 1)
    job.start_group(0)
    job.start_group(1)
    job.wait_rejoined(0, 1)
    job.wait_steps(job.committed_steps() + every)
    job.kill(1)


def restart_whole_job(job: TorchftJob, checkpoints: Path, every: int) -> int:
    """After ``every`` more steps, every running group killed at once and started again: they
    resume from the newest complete DCP checkpoint. Returns its step."""
    job.wait_steps(job.committed_steps() + every)
    running = sorted(job.processes)
    job.kill(*running)
    newest = newest_complete(checkpoints)
    assert newest is not None, "no checkpoint was written"
    for group in running:
        job.start_group(group)
    return newest[0]


def check_exactly_once(job: TorchftJob, expected: list[str], records: list[dict] | None = None) -> None:
    records = read_log(job.log) if records is None else records
    result = trained(records)
    lost, repeated = lost_and_repeated(result.rows, expected)
    assert (lost, repeated) == (0, 0), f"{lost} rows lost, {repeated} repeated of {len(expected)}"
    # the run did go through membership changes: steps of 3, of fewer, and of 3 again after the rejoins
    assert result.participants[3] and (result.participants[2] or result.participants[1]), result.participants
    reads = [r for r in records if "rows" in r]
    assert all(pids for _, pids in job.restarts(reads)), "a restarted group never read again"


@pytest.fixture(scope="module")
def cache_run(cache_dir, tmp_path_factory) -> tuple[TorchftJob, list[str], int]:
    """Groups killed and rejoining over a cache, then the whole job restarted from its last
    DCP checkpoint (a periodic one, every 10 steps)."""
    work = tmp_path_factory.mktemp("cache_run")
    checkpoints = work / "checkpoints"
    data = ["--cache", cache_dir, "--batch-size", str(BATCH), "--checkpoint-dir", str(checkpoints)]
    job = TorchftJob(work, [*data, "--checkpoint-every", "10"], step_seconds=0.04)  # room for a restart to boot
    kill_and_rejoin(job, every=15)
    resumed_at = restart_whole_job(job, checkpoints, every=15)
    job.finish()
    return job, row_hashes(Dataset.from_cache(cache_dir)), resumed_at


def as_trained(job: TorchftJob, resumed_at: int) -> list[dict]:
    """The log as the model saw it: before the whole-job restart, the steps up to the
    checkpoint it resumed from; after it, everything."""
    before = job.starts[-2].known  # the last two starts are the whole-job restart's
    return [r for r in read_log(job.log) if r["pid"] not in before or r["step"] < resumed_at]


def test_groups_die_and_rejoin_then_the_job_restarts_from_a_checkpoint(cache_run):
    job, expected, resumed_at = cache_run
    assert resumed_at > 0
    check_exactly_once(job, expected, as_trained(job, resumed_at))
    later = [r for r in read_log(job.log) if r["pid"] not in job.starts[-1].known and "rows" in r]
    assert later and min(r["step"] for r in later) == resumed_at  # the restarted job read on from the checkpoint


def test_groups_of_two_ranks_over_a_mix_of_a_shuffled_cache_and_byte_ranges(cache_dir, tmp_path):
    """Replica groups of two ranks under torchrun (rank j of a group reads item (cursor + r) * 2 + j)
    over a composed stream: a mix (until every source ends) of a cache in a global shuffle and
    files tokenized on the fly in byte ranges. One group killed whole and started again, one
    killed for good: each row once."""
    script = str(Path(__file__).parent / "torchft_compose_job.py")
    job = TorchftJob(tmp_path, ["--cache", cache_dir], ranks=2, step_seconds=0.05, script=script)
    job.start()
    job.wait_steps(10, timeout=120)
    job.kill(1)
    job.start_group(1)
    job.wait_rejoined(1, timeout=120)
    job.wait_steps(job.committed_steps() + 10)
    job.kill(2)
    job.finish()
    check_exactly_once(job, row_hashes_of(composed(cache_dir)))
    assert {r["width"] for r in read_log(job.log) if "rows" in r} == {2}


def test_the_check_sees_a_lost_and_a_repeated_row(cache_run):
    """The invariant's check itself: a read dropped from the log, and one logged twice, fail it."""
    job, expected, resumed_at = cache_run
    records = as_trained(job, resumed_at)
    reads = [i for i, r in enumerate(records) if "rows" in r]
    assert lost_and_repeated(trained(records).rows, expected) == (0, 0)
    dropped = records[: reads[5]] + records[reads[5] + 1 :]
    assert lost_and_repeated(trained(dropped).rows, expected) == (BATCH, 0)
    twice = {**records[reads[5]], "pid": -1}  # the same rows read by a process that died before its outcome
    assert lost_and_repeated(trained([*records, twice]).rows, expected) == (0, BATCH)


class _Manager:
    """Just enough of a Manager for the refusals, which come before any quorum."""

    def __init__(self, init_sync: bool) -> None:
        self._init_sync = init_sync

    def register_state_dict_fn(self, *args: object) -> None:
        pass


def test_refusals_in_one_line(cache_dir):
    ds = Dataset.from_cache(cache_dir).batch(BATCH)
    with pytest.raises(ConfigError, match="init_sync=False"):
        TorchftLoader(ds, _Manager(init_sync=True))
    with pytest.raises(ConfigError, match="without shard_by_rank"):
        TorchftLoader(ds.shard_by_rank(0, 2), _Manager(init_sync=False))
    with pytest.raises(ConfigError, match="group rank 2 of 2"):
        TorchftLoader(ds, _Manager(init_sync=False), group_rank=2, group_world_size=2)


def test_a_release_whose_ddp_restarts_the_job_is_warned_of():
    assert "manager.allreduce(p.grad)" in (torchft_version_warning("0.2.0") or "")
    assert torchft_version_warning("0.3.0") is None


def test_the_docs_loop_is_the_example_s():
    """Every line of the loop docs/fault-tolerance.md shows stands in the tested example, in order."""
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "fault-tolerance.md").read_text()
    block = docs[docs.index("```py", docs.index("## The loop")) + len("```py") :]
    shown = [line.strip() for line in block[: block.index("```")].splitlines() if line.strip()]
    example = iter(line.strip() for line in (root / "examples" / "torchft_train.py").read_text().splitlines())
    missing = [line for line in shown if not any(line == other for other in example)]
    assert not missing and len(shown) > 20, (
        f"lines of the docs' loop the example lacks (or has out of order): {missing}"
    )

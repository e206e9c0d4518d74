"""examples/jax_train.py: JAX processes on CPU (jax.distributed on localhost) feeding a jitted
step, the data state saved by Orbax beside the parameters (beamtok._src.distributed.orbax_state),
resumed on another process count with every row trained exactly once, and on the same count
exactly; the handler's refusals."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from beamtok import Dataset, StateError

from conftest import ROOT, paragraph_files, run_group, small_vocab_tokenizer

pytest.importorskip("jax")
pytest.importorskip("orbax.checkpoint")

from torchrun_runs import read_rows_log, starts_of, trained_rows

SCRIPT = str(ROOT / "examples" / "jax_train.py")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    return paragraph_files(tmp_path_factory.mktemp("jax-data"), 6, 20)


def run(processes: int, data: str, root: Path, name: str, **options: int) -> list[dict]:
    log = str(root / f"{name}-{{rank}}.jsonl")
    command = [
        sys.executable,
        SCRIPT,
        "--num-processes",
        str(processes),
        "--data",
        data,
        "--tokenizer",
        small_vocab_tokenizer(),
    ]
    command += [
        "--seq-len",
        "32",
        "--batch-size",
        "4",
        "--ckpt",
        str(root / "ckpt"),
        "--save-every",
        "3",
        "--rows-log",
        log,
    ]
    for key, value in options.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    root.mkdir(parents=True, exist_ok=True)
    done = run_group(command, timeout=300, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-5000:]
    return read_rows_log(log.replace("{rank}", str(r)) for r in range(processes))


def test_resumed_exactly_on_the_same_process_count_and_on_another_training_every_row_once(tmp_path, data):
    whole = run(2, data, tmp_path, "a", max_steps=8)  # checkpoints at steps 3, 6 and 8
    for later in ("6", "8"):  # as a job stopped after step 3's checkpoint leaves them
        shutil.rmtree(tmp_path / "ckpt" / later)
    resumed = run(2, data, tmp_path, "b", max_steps=8)
    key = lambda line: (line["step"], line["rank"])  # noqa: E731
    expected = {key(line): (line["rows"], line["loss"]) for line in whole if line["step"] > 3}
    assert {
        key(line): (line["rows"], line["loss"]) for line in resumed
    } == expected  # the same rows and loss at every step
    last = run(3, data, tmp_path, "c")  # to the end of the epoch on another process count
    assert {line["world"] for line in last} == {3} and min(line["step"] for line in last) == 9
    trained = trained_rows(starts_of(whole) + starts_of(resumed) + starts_of(last))
    every = Counter(
        (int(e["shard"]), int(e["index"]))
        for e in Dataset.from_files(data).tokenize(small_vocab_tokenizer()).ensure_bos_eos().concat_chunk(32)
    )
    assert max(trained.values()) == 1 and set(trained) == set(every)


def test_the_handler_refuses_missing_doubled_and_mixed_states(tmp_path):
    from beamtok._src.distributed.orbax_state import _read_states

    item = tmp_path / "data"
    item.mkdir()
    with pytest.raises(StateError, match="no beamtok state"):
        _read_states(item)
    for index in (0, 2):
        (item / f"process_{index}-of-3.json").write_text(json.dumps({"beamtok_state": index}))
    with pytest.raises(StateError, match=r"processes \[1\] of 3 are missing"):
        _read_states(item)
    (item / "process_1-of-3.json").write_text(json.dumps({"beamtok_state": 1}))
    assert [s["beamtok_state"] for s in _read_states(item)] == [0, 1, 2]
    (item / "process_00-of-3.json").write_text("{}")
    with pytest.raises(StateError, match="two beamtok states of process 0"):
        _read_states(item)
    (item / "process_00-of-3.json").unlink()
    (item / "process_0-of-2.json").write_text("{}")
    with pytest.raises(StateError, match=r"runs with \[2, 3\] processes"):
        _read_states(item)


def test_restore_returns_every_process_s_state_and_a_list_of_the_same_split_resumes_each_exactly(tmp_path):
    """One type back from the handler (a list, in process order) whatever the process count:
    each reader of a run split as the saved one resumes from its own entry, its deliveries its own."""
    from beamtok._src.distributed.orbax_state import BeamtokCheckpointHandler

    from conftest import CORPUS, TOKENIZER_DIR

    def ds(rank: int) -> Dataset:
        files = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "shakespeare-01.jsonl")]
        return Dataset.from_files(files).tokenize(str(TOKENIZER_DIR)).concat_chunk(64).shard_by_rank(rank, 2).batch(2)

    states = []
    for rank in range(2):
        it = ds(rank).iter()
        for _ in range(3 + rank):
            next(it)
        states.append(it.state_dict())
    item = tmp_path / "data"
    item.mkdir()
    for rank, state in enumerate(states):  # as two processes' handlers write them
        (item / f"process_{rank}-of-2.json").write_text(json.dumps(state))
    restored = BeamtokCheckpointHandler().restore(item)
    assert isinstance(restored, list) and [s["split"]["rank"] for s in restored] == [0, 1]
    for rank in range(2):
        alone, listed = ds(rank).iter(states[rank]), ds(rank).iter_merged(restored)
        assert listed.state_dict()["delivered"] == states[rank]["delivered"]
        for _ in range(4):
            a, b = next(alone), next(listed)
            assert (a["input_ids"] == b["input_ids"]).all() and (a["index"] == b["index"]).all()

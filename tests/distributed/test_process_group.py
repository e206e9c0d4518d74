"""Starting and ending a process group (``beamtok._src.distributed.process_group``) and finding the
checkpoint to resume from (``beamtok._src.distributed.checkpoint_dirs``): a group restarted by
``torchrun --max-restarts`` starts again instead of waiting for ever; a plain ``python`` run is a
group of one; a checkpoint marked complete that lost a file is named and passed over."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, run_torchrun

torch = pytest.importorskip("torch")

RESTARTED = textwrap.dedent(
    """
    import os, sys
    import torch
    import torch.distributed as dist
    from beamtok._src.distributed.process_group import end_process_group, start_process_group

    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank, world = start_process_group("gloo")
    total = torch.tensor([rank + 1])
    dist.all_reduce(total)
    if restart == 0 and rank == 1:
        os._exit(3)  # a rank dies after the group started: torchrun restarts the whole group
    end_process_group()
    with open(os.path.join(sys.argv[1], f"attempt-{restart}-rank-{rank}.txt"), "w") as f:  # a file each: no interleaved output
        f.write(f"rank {rank} of {world}: sum {int(total)}")
    """
)


def test_a_group_restarted_by_max_restarts_starts_again(tmp_path):
    script = tmp_path / "restarted.py"
    script.write_text(RESTARTED)
    run_torchrun(2, str(script), str(tmp_path), launcher=("--max-restarts=1", "--monitor-interval=0.5"), timeout=120)
    finished = {p.name: p.read_text() for p in tmp_path.glob("attempt-*.txt")}
    assert finished == {"attempt-1-rank-0.txt": "rank 0 of 2: sum 3", "attempt-1-rank-1.txt": "rank 1 of 2: sum 3"}


def test_a_plain_process_is_a_group_of_one_that_saves_and_loads(tmp_path):
    code = textwrap.dedent(
        f"""
        import torch, torch.distributed.checkpoint as dcp
        from beamtok._src.distributed.process_group import end_process_group, start_process_group
        assert start_process_group() == (0, 1) and start_process_group() == (0, 1)  # a started group is kept
        state = {{"w": torch.arange(4.0)}}
        dcp.save(state, checkpoint_id={str(tmp_path / "c")!r})
        loaded = {{"w": torch.zeros(4)}}
        dcp.load(loaded, checkpoint_id={str(tmp_path / "c")!r})
        assert loaded["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
        end_process_group()
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def dcp_checkpoint(root: Path, step: int, value: float) -> Path:
    import torch.distributed.checkpoint as dcp

    from beamtok._src.distributed.checkpoint_dirs import mark_complete, step_directory

    directory = step_directory(root, step)
    dcp.save({"w": torch.full((8,), value)}, checkpoint_id=str(directory), no_dist=True)
    mark_complete(directory)
    return directory


def test_a_checkpoint_that_lost_a_file_is_named_and_passed_over(tmp_path, caplog):
    from beamtok._src.distributed.checkpoint_dirs import COMPLETE_MARKER, missing_files, newest_complete

    first = dcp_checkpoint(tmp_path, 10, 1.0)
    second = dcp_checkpoint(tmp_path, 20, 2.0)
    assert newest_complete(tmp_path) == (20, second)
    listed = json.loads((second / COMPLETE_MARKER).read_text())["files"]
    data = next(name for name in listed if name.endswith(".distcp"))
    (second / data).unlink()
    assert missing_files(second) == [f"{data} (missing)"]
    with caplog.at_level(logging.WARNING, logger="beamtok._src.distributed.checkpoint_dirs"):
        assert newest_complete(tmp_path) == (10, first)
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "beamtok._src.distributed.checkpoint_dirs"]
    assert str(second) in warning and data in warning and "passed over" in warning
    metadata = first / ".metadata"
    metadata.write_bytes(metadata.read_bytes()[:-1])  # cut short
    assert missing_files(first) == [
        f".metadata ({len(metadata.read_bytes()) + 1} bytes written, {len(metadata.read_bytes())} now)"
    ]
    assert newest_complete(tmp_path) is None


def test_a_marker_of_an_earlier_version_is_taken_as_it_is(tmp_path):
    from beamtok._src.distributed.checkpoint_dirs import COMPLETE_MARKER, newest_complete

    directory = dcp_checkpoint(tmp_path, 5, 0.0)
    (directory / COMPLETE_MARKER).write_text("complete\n")
    assert newest_complete(tmp_path) == (5, directory)


def test_a_checkpoint_folder_that_does_not_exist_is_said_with_the_nearest_name(tmp_path, caplog):
    from beamtok._src.distributed.checkpoint_dirs import newest_complete

    (tmp_path / "checkpoints").mkdir()
    with caplog.at_level(logging.WARNING, logger="beamtok._src.distributed.checkpoint_dirs"):
        assert newest_complete(tmp_path / "checkpionts") is None
    assert [r.getMessage() for r in caplog.records] == [
        f"checkpoint folder {tmp_path / 'checkpionts'} does not exist: starting from scratch; "
        f"did you mean {str(tmp_path / 'checkpoints')!r}?"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="beamtok._src.distributed.checkpoint_dirs"):
        assert newest_complete(tmp_path / "fresh" / "run") is None
    assert "does not exist: starting from scratch (it is made by the first save)" in caplog.text

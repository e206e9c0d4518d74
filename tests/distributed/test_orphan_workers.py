"""No orphans: the DataLoader workers of a rank that is SIGKILLed exit within seconds (each
worker asks the kernel for a signal when its parent dies), instead of waiting on their queues
for good with their memory held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import CORPUS, ROOT, TOKENIZER_DIR

pytest.importorskip("torch")
pytest.importorskip("torchdata")

RANK = textwrap.dedent(
    f"""
    import sys, time
    from beamtok import Dataset
    from beamtok._src.distributed.torch_loader import DistributedLoader
    ds = Dataset.from_files({str(CORPUS / "shakespeare-{00..01}.jsonl")!r}).tokenize({str(TOKENIZER_DIR)!r}).concat_chunk(2048).batch(8)
    loader = DistributedLoader(ds, even=None, num_workers=2)
    it = iter(loader)
    next(it)
    print(" ".join(str(w.pid) for w in loader.loader._iterator._workers), flush=True)
    time.sleep(600)
    """
)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_workers_of_a_killed_rank_exit_within_seconds():
    rank = subprocess.Popen([sys.executable, "-c", RANK], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert rank.stdout is not None
        workers = [int(pid) for pid in rank.stdout.readline().split()]
        assert len(workers) == 2 and all(alive(pid) for pid in workers)
        os.kill(rank.pid, signal.SIGKILL)
        rank.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [pid for pid in workers if alive(pid)]
    finally:
        rank.kill()
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"DataLoader workers {left} outlived their killed rank"

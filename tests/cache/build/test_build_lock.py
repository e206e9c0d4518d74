"""The build lock: a dead holder on this host and a silent one anywhere are taken over, a live
one and another host's are refused, and two runs that see one stale lock cannot both take it."""

from __future__ import annotations

import json
import multiprocessing
import socket
import subprocess
import sys
import time

import pytest

from beamtok import CacheError
from beamtok._src.cache.build.lock import LOCK_FILE, BuildLock
from beamtok._src.cache.format.storage import Storage


def dead_pid() -> int:
    """The pid of a process that has ended (pids are not reused this quickly)."""
    return int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )


def holder(**fields) -> dict:
    return {
        "token": "old",
        "host": socket.gethostname(),
        "pid": dead_pid(),
        "started": time.time() - 60,
        "heartbeat": time.time(),
        **fields,
    }


def test_another_hosts_lock_is_not_judged_by_this_hosts_processes(tmp_path):
    storage = Storage(str(tmp_path))
    elsewhere = holder(host="another-host")  # its pid is no process here, which says nothing of that host
    storage.write_bytes(LOCK_FILE, json.dumps(elsewhere).encode())
    with pytest.raises(CacheError, match=rf"pid {elsewhere['pid']} on another-host"):
        BuildLock(storage).acquire()
    storage.write_bytes(LOCK_FILE, json.dumps({**elsewhere, "heartbeat": time.time() - 700}).encode())
    with BuildLock(storage) as lock:  # silent past the stale rule: taken over
        assert lock.taken_over is not None and lock.taken_over["host"] == "another-host"


def _take(directory: str, barrier, results) -> None:
    """Take the lock after every racer has read the stale holder (the read is slowed so all of
    them see it before any of them replaces it)."""
    original = BuildLock.stale_reason

    def slow(self, seen):
        reason = original(self, seen)
        time.sleep(0.5)
        return reason

    BuildLock.stale_reason = slow  # type: ignore[method-assign]
    lock = BuildLock(Storage(directory), heartbeat=60)
    barrier.wait()
    try:
        lock.acquire()
    except CacheError:
        results.put("refused")
        return
    results.put("took")
    time.sleep(2.0)  # hold it while the others decide
    lock.release()


def test_two_runs_cannot_both_take_over_one_stale_lock(tmp_path):
    Storage(str(tmp_path)).write_bytes(LOCK_FILE, json.dumps(holder()).encode())
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(4)
    results = context.Queue()
    racers = [context.Process(target=_take, args=(str(tmp_path), barrier, results)) for _ in range(4)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=60)
    outcomes = sorted(results.get(timeout=5) for _ in racers)
    assert outcomes == ["refused", "refused", "refused", "took"]

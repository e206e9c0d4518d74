"""A torchft job on this machine: a lighthouse and replica groups (one process each) running
``examples/torchft_train.py``, groups SIGKILLed and started again while the others train, and
the rows log read back into what was trained.

Shared by ``tests/distributed/test_torchft.py`` and ``benchmarks/soak_torchft.py``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = str(ROOT / "examples" / "torchft_train.py")
LIGHTHOUSE = str(Path(sys.executable).parent / "torchft_lighthouse")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Start:
    """A (re)start of a group: when, and the processes the log had named before it (so the
    processes it started are the group's that the log names later)."""

    group: int
    when: float
    known: frozenset[int]

    def pids(self, records: list[dict[str, Any]], later: Start | None = None) -> set[int]:
        """The processes of this start the records name; ``later``: the group's next start,
        whose processes are not this one's."""
        return {
            r["pid"]
            for r in records
            if r["group"] == self.group and r["pid"] not in self.known and (later is None or r["pid"] in later.known)
        }


@dataclass
class TorchftJob:
    """A lighthouse and ``groups`` replica groups training on ``data_args`` (``--cache DIR`` or
    ``--files ... --tokenizer ...``), each appending to one rows log."""

    work: Path
    data_args: list[str]
    groups: int = 3
    step_seconds: float = 0.02
    pg_timeout: float = 2.0  # a dead peer's all-reduce fails after this: the stall of each kill
    min_replicas: int = 2  # a majority: with 1, a lone survivor and the groups rejoining can form two quorums
    script: str = SCRIPT
    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    ranks: int = 1  # ranks in each group: more run under torchrun, one process group a replica group
    starts: list[Start] = field(default_factory=list)
    lighthouse: subprocess.Popen[bytes] | None = None

    def restarts(self, records: list[dict[str, Any]]) -> list[tuple[Start, set[int]]]:
        """Each restart (a start after the first ``groups``) with the processes it started."""
        found = []
        for i, start in enumerate(self.starts[self.groups :], self.groups):
            later = next((s for s in self.starts[i + 1 :] if s.group == start.group), None)
            found.append((start, start.pids(records, later)))
        return found

    @property
    def log(self) -> Path:
        return self.work / "rows.log"

    def start(self) -> None:
        """The lighthouse, then every group."""
        self.work.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.address = f"http://127.0.0.1:{port}"
        self.lighthouse = subprocess.Popen(
            [
                LIGHTHOUSE,
                "--min_replicas",
                str(self.min_replicas),
                "--quorum_tick_ms",
                "100",
                "--join_timeout_ms",
                "1000",  # how long a rejoining group may wait while the others form quorums without it
                "--heartbeat_timeout_ms",
                "1000",
                "--bind",
                f"127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.work / "lighthouse.err", "ab"),
        )
        for group in range(self.groups):
            self.start_group(group)

    def start_group(self, group: int) -> None:
        env = {
            **os.environ,
            "REPLICA_GROUP_ID": str(group),
            "TORCHFT_LIGHTHOUSE": self.address,
            "OMP_NUM_THREADS": "1",
            "PYTHONWARNINGS": "ignore",
        }
        for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
            env.pop(name, None)
        command = [sys.executable, self.script, *self.data_args, "--rows-log", str(self.log)]
        command += ["--step-seconds", str(self.step_seconds), "--pg-timeout", str(self.pg_timeout)]
        command += ["--min-replicas", str(self.min_replicas)]
        if self.ranks > 1:  # torchrun hosts the group's store and sets each rank's RANK and WORLD_SIZE
            launcher = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node"]
            command = [*launcher, str(self.ranks), "--master_port", str(free_port()), *command[1:]]
        known = frozenset(r["pid"] for r in read_log(self.log))
        self.processes[group] = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.work / f"group-{group}.err", "ab"),
        )
        self.starts.append(Start(group, time.time(), known))

    def kill(self, *groups: int) -> None:
        """SIGKILL these groups at once (every rank), wherever they are in their step."""
        doomed = [process for group in groups for process in _with_descendants(self.processes[group].pid)]
        for process in doomed:  # torchrun starts its ranks in sessions of their own: each is named
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGKILL)
        for group in groups:
            self.processes.pop(group).wait()

    def committed_steps(self) -> int:
        """Steps committed so far by any group (the highest step a commit was logged for, +1)."""
        steps = [r["step"] for r in read_log(self.log) if r.get("commit") and r.get("reading")]
        return max(steps) + 1 if steps else 0

    def wait_for(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            for group, process in self.processes.items():
                if process.poll() not in (None, 0):
                    raise AssertionError(f"group {group} failed ({what}): {self.stderr(group)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {self.stderr(*self.processes)}")
            time.sleep(0.05)

    def wait_steps(self, steps: int, timeout: float = 60) -> None:
        self.wait_for(lambda: self.committed_steps() >= steps, timeout, f"{steps} committed steps")

    def wait_rejoined(self, *groups: int, timeout: float = 120) -> None:
        """Wait until each of these groups' current process has healed and read a batch."""
        latest = {start.group: start for start in self.starts}

        def rejoined() -> bool:
            reads = [r for r in read_log(self.log) if "rows" in r]
            return all(latest[g].pids(reads) for g in groups)

        self.wait_for(rejoined, timeout, f"groups {groups} to heal and read")

    def finish(self, timeout: float = 120) -> None:
        """Wait for every running group to end its loop, then stop the lighthouse."""
        try:
            self.wait_for(lambda: all(p.poll() is not None for p in self.processes.values()), timeout, "the end")
        finally:
            self.stop()

    def finish_or_stall(self, idle: float, timeout: float = 600) -> bool:
        """Wait for every group to end, or for no step to commit for ``idle`` seconds (groups
        left waiting for a quorum that cannot form); then stop everything. Returns whether it
        stalled."""
        deadline = time.monotonic() + timeout
        last, since = self.committed_steps(), time.monotonic()
        try:
            while any(p.poll() is None for p in self.processes.values()) and time.monotonic() < deadline:
                time.sleep(0.5)
                now = self.committed_steps()
                if now != last:
                    last, since = now, time.monotonic()
                elif time.monotonic() - since > idle:
                    return True
            return False
        finally:
            self.stop()

    def stop(self) -> None:
        for process in [*self.processes.values(), *([self.lighthouse] if self.lighthouse else [])]:
            for doomed in _with_descendants(process.pid):
                with contextlib.suppress(psutil.NoSuchProcess):
                    doomed.send_signal(signal.SIGKILL)
            process.wait()

    def stderr(self, *groups: int) -> str:
        return "\n".join(
            f"--- group {g}:\n" + (self.work / f"group-{g}.err").read_text(errors="replace")[-3000:] for g in groups
        )


def _with_descendants(pid: int) -> list[psutil.Process]:
    try:
        process = psutil.Process(pid)
        return [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def read_log(path: Path) -> list[dict[str, Any]]:
    """The log's records; a last line cut by a SIGKILL is dropped."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


@dataclass
class Trained:
    """What a rows log says was trained: the rows of committed steps, and the steps' figures."""

    rows: list[str]
    steps: int
    participants: Counter[int]  # committed steps by their number of participants
    attempts_failed: int


def trained(records: list[dict[str, Any]]) -> Trained:
    """The rows each committed step trained. A read counts where its own process logged that
    step as committed; a process killed before logging its step's outcome counts where the
    step was committed by the others with this read inside the committed range of batches, by
    a quorum of as many participants as the read's (a quorum the killed group was not in, the
    step retried without it, has fewer)."""
    commits = {(r["pid"], r["attempt"]): r for r in records if "commit" in r}
    committed_ranges: dict[int, tuple[int, int]] = {}
    for r in commits.values():
        if r["commit"] and r["reading"]:
            seen = committed_ranges.setdefault(r["step"], (r["cursor"], r["n"]))
            assert seen == (r["cursor"], r["n"]), f"step {r['step']}: groups disagree on its batches: {seen} vs {r}"
    rows: list[str] = []
    for r in records:
        if "rows" not in r:
            continue
        outcome = commits.get((r["pid"], r["attempt"]))
        if outcome is not None:
            if outcome["commit"]:
                cursor, n = committed_ranges[r["step"]]
                width = r.get("width", 1)  # a group's ranks read the items of its batch
                assert cursor * width <= r["item"] < (cursor + n) * width, f"read outside its step's batches: {r}"
                rows += r["rows"]
        elif r["step"] in committed_ranges:
            cursor, n = committed_ranges[r["step"]]
            if cursor * r.get("width", 1) <= r["item"] < (cursor + n) * r.get("width", 1) and r["n"] == n:
                rows += r["rows"]
    ordered = sorted(committed_ranges.items())
    for (step, (cursor, n)), (later, (after, _)) in itertools.pairwise(ordered):
        assert later == step + 1 and after == cursor + n, f"steps {step} -> {later}: batches {cursor}+{n} -> {after}"
    return Trained(
        rows=rows,
        steps=len(committed_ranges),
        participants=Counter(n for _, n in committed_ranges.values()),
        attempts_failed=sum(1 for r in commits.values() if not r["commit"] and r["reading"]),
    )


def trained_by_outcome(records: list[dict[str, Any]]) -> list[str]:
    """The rows of reads whose step committed, for loaders that deal no global batches (each
    group its own share): a read counts where its process logged its step as committed, or,
    killed before that, where another group committed that step with as many participants."""
    commits = {(r["pid"], r["attempt"]): r for r in records if "commit" in r}
    committed = {(r["step"], r["n"]) for r in commits.values() if r["commit"] and r["reading"]}
    rows: list[str] = []
    for r in records:
        if "rows" in r:
            outcome = commits.get((r["pid"], r["attempt"]))
            if outcome["commit"] if outcome else (r["step"], r["n"]) in committed:
                rows += r["rows"]
    return rows


def rejoin_seconds(job: TorchftJob, records: list[dict[str, Any]]) -> list[float]:
    """For each restart of a group, the seconds from its start to its first committed step in
    which it read (healed and training again)."""
    first: dict[int, float] = {}
    for r in records:
        if "commit" in r and r["commit"] and r["reading"]:
            first.setdefault(r["pid"], r["at"])
    seconds = []
    for start, pids in job.restarts(records):
        firsts = [first[pid] for pid in pids if pid in first]
        if firsts:
            seconds.append(max(firsts) - start.when)  # every rank of the group training again
    return seconds


def lost_and_repeated(used: list[str], expected: list[str]) -> tuple[int, int]:
    """Rows of the data never trained, and trainings beyond a row's first."""
    have, want = Counter(used), Counter(expected)
    return sum((want - have).values()), sum((have - want).values())

"""Drive torchrun jobs of a training script and account for the rows they trained: what the
tests of ``examples/torchrun_train.py`` and the kill/restart soak share.

A run's ranks append one JSON line per step to a rows log (``{"step", "rank", "world",
"restart", "rows"}``). A run killed part way, or restarted by ``torchrun --max-restarts``,
leaves steps past its last checkpoint in its logs; the next start resumes from that checkpoint
and trains them again. :func:`trained_rows` counts, for every start (a run, or one restart of
it), only the steps up to where the next start resumed: what the final model was trained on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Start", "TorchrunJob", "read_rows_log", "starts_of", "trained_rows"]


@dataclass
class Start:
    """One start of a training job (a run, or a restart within it): its steps, by step, each
    the rows of every rank (padding rows, shard -1, left out)."""

    world: int
    steps: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def first_step(self) -> int:
        return min(self.steps) if self.steps else 0


def read_rows_log(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Every line of the rows logs at ``paths`` (a cut-off last line, from a SIGKILL, is skipped)."""
    lines: list[dict[str, Any]] = []
    for path in paths:
        if not Path(path).exists():
            continue
        for text in Path(path).read_text().splitlines():
            try:
                lines.append(json.loads(text))
            except ValueError:
                continue
    return lines


def starts_of(lines: Sequence[dict[str, Any]]) -> list[Start]:
    """The starts of one run's logs, by their ``restart`` count."""
    by_restart: dict[int, Start] = {}
    for line in lines:
        start = by_restart.setdefault(int(line.get("restart", 0)), Start(world=int(line["world"])))
        rows = [(int(s), int(i)) for s, i in line["rows"] if s >= 0]
        start.steps.setdefault(int(line["step"]), []).extend(rows)
    return [by_restart[k] for k in sorted(by_restart)]


def trained_rows(starts: Sequence[Start]) -> Counter[tuple[int, int]]:
    """How often each row was trained, counting each start's steps up to where the next start
    resumed (the last start: all of its steps)."""
    counts: Counter[tuple[int, int]] = Counter()
    for k, start in enumerate(starts):
        later = [s.first_step for s in starts[k + 1 :] if s.steps]
        until = later[0] - 1 if later else max(start.steps, default=0)
        for step, rows in start.steps.items():
            if step <= until:
                counts.update(rows)
    return counts


class TorchrunJob:
    """``python -m torch.distributed.run --standalone`` of a script, in a process group of its
    own (so a timeout or a failed test ends every rank and DataLoader worker with it)."""

    def __init__(
        self, nproc: int, script: str, args: Sequence[str], *, max_restarts: int = 0, cwd: str | None = None
    ) -> None:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
        command += [f"--max-restarts={max_restarts}", "--monitor-interval=0.5", script, *args]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=cwd, env=env
        )

    def rank_pids(self) -> list[int]:
        """The pids of the ranks torchrun runs now (its direct children)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rpartition(")")[2].split()[1])
            if parent == self.process.pid:
                pids.append(int(entry.name))
        return sorted(pids)

    def kill_rank(self, index: int) -> int | None:
        """SIGKILL the ``index``-th rank process (of those alive; modulo their count)."""
        pids = self.rank_pids()
        if not pids:
            return None
        pid = pids[index % len(pids)]
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        return pid

    def wait(self, timeout: float) -> subprocess.CompletedProcess[str]:
        """Wait for the job; past ``timeout`` seconds every process of its group is killed and
        ``TimeoutError`` raised with what it printed."""
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            out, err = self.process.communicate()
            raise TimeoutError(f"torchrun ran over {timeout} s:\n{out[-2000:]}\n{err[-4000:]}") from None
        return subprocess.CompletedProcess(self.process.args, self.process.returncode, out, err)

    def stop(self) -> None:
        """Kill every process of the job's group."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

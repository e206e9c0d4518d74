"""How long the test suite takes here, beside how fast the machine was while it ran.

    python benchmarks/suite_time.py [--fast] [--cold] [--out NAME.json]

Runs the suite as ``make unit`` does (``pytest -q -n auto tests``; ``--fast``: as ``make
test-fast`` does, ``-m "not slow"``) and records its wall time, the CPU of the whole process tree
(user + system of pytest, its xdist workers and every subprocess they reaped) and each test's
wall time and CPU (``benchmarks/suite_account.py``), summed by test module.

On a shared machine the same suite takes minutes more or less from one hour to the next, so a
wall time alone says little. A fixed pure-Python workload (the *probe*) runs three times in a
new interpreter before the suite and three times after it; its median CPU seconds say how fast
the machine was, and ``wall_over_probe`` (the suite's wall time in probes) can be compared
between runs on one machine.

``--cold`` first removes what the suite keeps under ``build/`` between runs (the tokenizers it
trains, ``build/test-built``, and the ones it loads through transformers,
``build/test-tokenizers``), as a fresh clone after ``make setup`` starts: its suite run
measures what CI's does. Results go to benchmarks/results/suite_time.json (``--fast``:
suite_time_fast.json).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, machine_line, write_results

PROBE = "import time; t = time.process_time(); sum(i * i for i in range(10**7)); print(time.process_time() - t)"
KEPT = ("build/test-built", "build/test-tokenizers")  # what the suite keeps between runs
TOP_MODULES = 15


def probe(times: int = 3) -> list[float]:
    """CPU seconds of the probe workload, each in a new interpreter."""
    return [float(subprocess.check_output([sys.executable, "-c", PROBE], text=True)) for _ in range(times)]


def by_module(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tests, wall seconds and CPU seconds summed per test module, the costliest first."""
    modules: dict[str, dict[str, Any]] = collections.defaultdict(lambda: {"tests": 0, "wall_s": 0.0, "cpu_s": 0.0})
    for record in records:
        module = modules[record["test"].split("::", 1)[0]]
        module["tests"] += 1
        module["wall_s"] += record["wall_s"]
        module["cpu_s"] += record["cpu_self_s"] + record["cpu_children_s"]
    ranked = sorted(modules.items(), key=lambda item: -item[1]["cpu_s"])
    return {
        name: {k: round(v, 1) if isinstance(v, float) else v for k, v in figures.items()} for name, figures in ranked
    }


def commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    )
    return head.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fast", action="store_true", help='the make test-fast selection (-m "not slow")')
    parser.add_argument("--cold", action="store_true", help="start without the tokenizers the suite keeps under build/")
    parser.add_argument("--out", help="results file name (default suite_time.json, suite_time_fast.json)")
    args = parser.parse_args()

    if args.cold:
        for kept in KEPT:
            shutil.rmtree(ROOT / kept, ignore_errors=True)
    command = [sys.executable, "-m", "pytest", "-q", "-n", "auto", "-p", "no:cacheprovider", "-p", "suite_account"]
    command += [*(["-m", "not slow"] if args.fast else []), "tests"]
    before = probe()
    with tempfile.TemporaryDirectory() as scratch:
        account = Path(scratch) / "tests.jsonl"
        path = os.pathsep.join(p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path, "SUITE_ACCOUNT": str(account)}
        tree_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        tree_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        records = [json.loads(line) for line in account.read_text().splitlines()] if account.exists() else []
    after = probe()
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    if run.returncode != 0:
        raise SystemExit(
            f"the suite failed (exit {run.returncode}): {summary}\n{run.stdout[-3000:]}{run.stderr[-2000:]}"
        )

    cpu = (tree_after.ru_utime - tree_before.ru_utime) + (tree_after.ru_stime - tree_before.ru_stime)
    speed = statistics.median(before + after)
    results = {
        "machine": machine_line(),
        "note": "suite wall and CPU beside the probe's CPU seconds (a fixed pure-Python workload) before and after",
        "commit": commit(),
        "selection": "make test-fast (-m 'not slow')" if args.fast else "make unit (every test)",
        "cold": args.cold,
        "outcome": summary,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "cpu_over_wall": round(cpu / wall, 2),
        "probe_s": {"before": [round(s, 3) for s in before], "after": [round(s, 3) for s in after]},
        "probe_median_s": round(speed, 3),
        "wall_over_probe": round(wall / speed),
        "tests": {
            "count": len(records),
            "wall_s": round(sum(r["wall_s"] for r in records), 1),
            "cpu_self_s": round(sum(r["cpu_self_s"] for r in records), 1),
            "cpu_children_s": round(sum(r["cpu_children_s"] for r in records), 1),
        },
        "modules": dict(list(by_module(records).items())[:TOP_MODULES]),
    }
    write_results(
        args.out or ("suite_time_fast.json" if args.fast else "suite_time.json"), results, corpus="the test suite"
    )
    print(f"{summary}: {wall / 60:.1f} min, {cpu:.0f} CPU-s; probe {speed:.2f} s ({before} before, {after} after)")


if __name__ == "__main__":
    main()

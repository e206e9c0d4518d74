"""A cache built on a dask.distributed cluster against the local multi-processing build, on the
same files and the same cores.

    python benchmarks/dask_build.py [--mb 80] [--rounds 3] [--workers 2]

A scheduler and ``--workers`` single-threaded worker processes are started on 127.0.0.1 for
the run. Each round builds, in turns, with ``beamtok cache`` as a user types it (its own
process, timed from start to exit):

- **local**: ``--direct_running_mode=multi_processing --direct_num_workers=N``;
- **dask**: ``--runner=DaskRunner --dask_client_address=...`` (the workers already running);

over eight files of ``--mb`` in all, and over one small file (where the time is mostly each
runner's own: starting workers or handing a graph to the scheduler). Where the time goes is
split the same way: the small build's seconds are the fixed cost, and the rest over the tokens
added is the rate past it. Both caches are compared byte for byte (the manifest's creation
time aside). Ratios are dask / local within a round, median and range over rounds. Writes
benchmarks/results/dask_build.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
WORK = HERE / "work" / "dask-build"
DASK = str(Path(sys.executable).parent / "dask")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_cluster(workers: int) -> tuple[str, list[subprocess.Popen[bytes]]]:
    import distributed

    port = free_port()
    address = f"127.0.0.1:{port}"
    log = open(WORK / "cluster.log", "ab")
    processes = [
        subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    ]
    for _ in range(workers):
        command = [DASK, "worker", f"tcp://{address}", "--nthreads", "1", "--no-dashboard"]
        processes.append(subprocess.Popen(command, cwd=WORK, stdout=log, stderr=log, start_new_session=True))
    with distributed.Client(address, timeout=60) as client:
        client.wait_for_workers(workers, timeout=60)
    return address, processes


def build(paths: list[str], output: Path, options: list[str]) -> dict[str, Any]:
    shutil.rmtree(output, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        *paths,
        "--tokenizer",
        TOKENIZER,
        "--seq-len",
        "2048",
        "--output",
        str(output),
        *options,
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    manifest = json.loads((output / "manifest.json").read_text())
    return {"seconds": seconds, "tokens": int(manifest["totals"]["tokens"])}


def same_files(a: Path, b: Path) -> bool:
    def files(root: Path) -> dict[str, bytes]:
        out = {}
        for path in sorted(root.rglob("*")):
            if path.is_file():
                data = path.read_bytes()
                if path.name == "manifest.json":
                    manifest = json.loads(data)
                    manifest.pop("created", None)
                    data = json.dumps(manifest, sort_keys=True).encode()
                out[str(path.relative_to(root))] = data
        return out

    return files(a) == files(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=80.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import build_shards, write_results

    WORK.mkdir(parents=True, exist_ok=True)
    big = build_shards("dask-build", args.mb, 8)
    small = build_shards("dask-build-small", 0.2, 1)
    address, processes = start_cluster(args.workers)
    kinds = {
        "local": ["--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}"],
        "dask": ["--runner=DaskRunner", f"--dask_client_address={address}"],
    }
    runs: dict[str, list[dict[str, Any]]] = {f"{k}{size}": [] for k in kinds for size in ("", "_small")}
    identical = []
    try:
        for r in range(args.rounds):
            order = list(kinds) if r % 2 == 0 else list(reversed(kinds))
            for size, paths in (("", big), ("_small", small)):
                for kind in order:
                    runs[f"{kind}{size}"].append(build(paths, WORK / f"cache-{kind}", kinds[kind]))
                identical.append(same_files(WORK / "cache-local", WORK / "cache-dask"))
            for kind in kinds:
                whole, little = runs[kind][-1], runs[f"{kind}_small"][-1]
                whole["tokens_per_s"] = whole["tokens"] / whole["seconds"]
                whole["past_fixed_tokens_per_s"] = (whole["tokens"] - little["tokens"]) / (
                    whole["seconds"] - little["seconds"]
                )
            print(
                f"round {r}: "
                + ", ".join(
                    f"{k} {runs[k][-1]['seconds']:.1f} s (fixed {runs[k + '_small'][-1]['seconds']:.1f} s, then {runs[k][-1]['past_fixed_tokens_per_s'] / 1e6:.2f} M tokens/s)"
                    for k in kinds
                ),
                flush=True,
            )
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)

    def ratio(key: str) -> dict[str, float]:
        values = [d[key] / loc[key] for d, loc in zip(runs["dask"], runs["local"])]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    results = {
        "workers": args.workers,
        "corpus_mb": sum(os.path.getsize(p) for p in big) / 1e6,
        "tokens": runs["local"][0]["tokens"],
        "caches_identical": all(identical),
        "seconds": {k: statistics.median(x["seconds"] for x in v) for k, v in runs.items()},
        "fixed_seconds": {k: statistics.median(x["seconds"] for x in runs[f"{k}_small"]) for k in kinds},
        "past_fixed_tokens_per_s": {k: statistics.median(x["past_fixed_tokens_per_s"] for x in runs[k]) for k in kinds},
        "ratios": {
            "dask / local, seconds of the whole build": ratio("seconds"),
            "dask / local, tokens/s past the fixed cost": ratio("past_fixed_tokens_per_s"),
        },
        "runs": runs,
    }
    for name, value in results["ratios"].items():
        print(f"  {name:<46} {value['median']:.2f}x ({value['min']:.2f}-{value['max']:.2f})")
    print(f"  caches identical: {results['caches_identical']}")
    write_results("dask_build.json", results)


if __name__ == "__main__":
    main()

"""Elastic soak: a mix of 3 sources (one from a cache) read by 1, 2 or 4 simulated ranks, the
world size changing at random restarts, the consumer SIGKILLed at random moments.

    python benchmarks/soak_elastic.py [--copies 6] [--every 10] [--die-after 20 80] [--seed 0]

The stream: three sources (two on-the-fly sets of shards in rotating formats, one packed
cache of a third set), mixed 0.5/0.3/0.2 with ``stop="first_exhausted"``, split by examples
over the ranks (so the whole stream does not depend on the world size), each rank shuffling
in windows of 32 (a restart part way through windows hands them on), batches of 4. A
consumer process runs W ranks in one process, one batch from each rank a step; every
``--every`` steps it saves all ranks' states and the (source, shard, index) of every example
since the last checkpoint, atomically. It SIGKILLs itself after a random number of delivered
steps (counted from its first batch, so start-up time never decides whether a consumer
reaches a checkpoint). The driver restarts it on a random world size from {1, 2, 4} with the
list of the last checkpoint's states, until the stream ends. The examples of all checkpoints
together must be those of one uninterrupted single-reader run: none lost, none repeated.
Writes benchmarks/results/soak_elastic.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from soak import build_corpus

from common import ROOT, WORK, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
WORLDS = (1, 2, 4)


def sources(paths: list[str]) -> list[Any]:
    from beamtok import Dataset

    def corpus(files: list[str]) -> Any:
        return Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(512)

    third = len(paths) // 3
    cache_dir = WORK / "soak-elastic-cache"
    if (cache_dir / "manifest.json").exists():
        cached = Dataset.from_cache(str(cache_dir))
    else:
        cached = corpus(paths[2 * third :]).cache(str(cache_dir), overwrite=True, row_group_rows=64)
    return [corpus(paths[:third]).shuffle_shards(seed=1), corpus(paths[third : 2 * third]), cached]


def dataset(paths: list[str]) -> Any:
    from beamtok import Dataset

    return Dataset.mix(sources(paths), [0.5, 0.3, 0.2], seed=0, stop="first_exhausted", block_size=100)


def provenance(batch: dict[str, Any]) -> list[list[int]]:
    return [list(row) for row in zip(batch["source"].tolist(), batch["shard"].tolist(), batch["index"].tolist())]


def consume(paths: list[str], run_dir: Path, world: int, every: int, die_after: int) -> None:
    checkpoints = sorted(run_dir.glob("ckpt-*.json"))
    states = json.loads(checkpoints[-1].read_text())["states"] if checkpoints else None
    number = len(checkpoints)
    ds = dataset(paths)
    iterators = [
        ds.shard_by_rank(rank, world, split="examples").shuffle(32, seed=1).batch(4).iter(states)
        for rank in range(world)
    ]
    pending: list[list[int]] = []
    live = list(range(world))
    steps = 0
    while live:
        for rank in list(live):
            batch = next(iterators[rank], None)
            if batch is None:
                live.remove(rank)
            else:
                pending.extend(provenance(batch))
        steps += 1
        if steps % every == 0 and live:
            number = _checkpoint(run_dir, number, iterators, pending, world)
            pending = []
        if steps == die_after:
            os.kill(os.getpid(), signal.SIGKILL)
    _checkpoint(run_dir, number, iterators, pending, world, done=True)


def _checkpoint(
    run_dir: Path, number: int, iterators: list[Any], rows: list[list[int]], world: int, done: bool = False
) -> int:
    tmp = run_dir / f".ckpt-{number:06d}.tmp"
    tmp.write_text(
        json.dumps({"states": [it.state_dict() for it in iterators], "rows": rows, "world": world, "done": done})
    )
    os.replace(tmp, run_dir / f"ckpt-{number:06d}.json")  # atomic: a kill leaves old or new
    return number + 1


def uninterrupted(paths: list[str], out: Path) -> None:
    rows = [row for batch in dataset(paths).batch(4) for row in provenance(batch)]
    out.write_text(json.dumps(rows))


def run_child(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, *args], cwd=Path(__file__).parent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--every", type=int, default=10, help="Steps between checkpoints.")
    parser.add_argument(
        "--die-after",
        type=int,
        nargs=2,
        default=(20, 80),
        metavar=("MIN", "MAX"),
        help="Steps a consumer delivers before it is killed.",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    paths = build_corpus(args.copies)
    shutil.rmtree(WORK / "soak-elastic-cache", ignore_errors=True)
    started = time.perf_counter()
    reference = WORK / "soak-elastic-reference.json"
    if run_child("uninterrupted", json.dumps(paths), str(reference)).wait() != 0:
        sys.exit("the uninterrupted run failed")
    want = Counter(tuple(row) for row in json.loads(reference.read_text()))
    reference_seconds = time.perf_counter() - started
    print(f"uninterrupted run: {sum(want.values())} examples in {reference_seconds:.1f} s")

    run_dir = WORK / "soak-elastic-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    rng = random.Random(args.seed)
    kills, worlds = 0, []
    started = time.perf_counter()
    while True:
        world = rng.choice(WORLDS)
        worlds.append(world)
        die_after = rng.randint(*args.die_after)
        code = run_child("consume", json.dumps(paths), str(run_dir), str(world), str(args.every), str(die_after)).wait()
        if code == -signal.SIGKILL:
            kills += 1
            print(
                f"  consumer #{kills} on {world} rank(s) killed after {die_after} steps; {len(list(run_dir.glob('ckpt-*.json')))} checkpoints"
            )
            continue
        if code != 0:
            sys.exit(f"a consumer exited with status {code}")
        break
    checkpoints = sorted(run_dir.glob("ckpt-*.json"))
    assert json.loads(checkpoints[-1].read_text())["done"]
    got = Counter(tuple(row) for c in checkpoints for row in json.loads(c.read_text())["rows"])
    lost, repeated = want - got, got - want
    result = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}",
        "sources": "2 on the fly + 1 cache, weights 0.5/0.3/0.2, split by examples, shuffle(32) per rank",
        "examples": sum(want.values()),
        "checkpoints": len(checkpoints),
        "kill_resume_cycles": kills,
        "world_size_changes": sum(a != b for a, b in itertools.pairwise(worlds)),
        "world_sizes": dict(Counter(worlds)),
        "lost": sum(lost.values()),
        "repeated": sum(repeated.values()),
        "seconds_uninterrupted": reference_seconds,
        "seconds_with_kills": time.perf_counter() - started,
    }
    print(json.dumps(result, indent=2))
    write_results(
        "soak_elastic.json", result, "the shipped prose (data/corpus), copies in rotating formats, one set cached"
    )
    if lost or repeated:
        sys.exit(f"MISMATCH: {result['lost']} examples lost, {result['repeated']} repeated")
    print(
        f"OK: {kills} kill/resume cycles, {result['world_size_changes']} world-size changes, none lost, none repeated"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "consume":
        consume(json.loads(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif len(sys.argv) > 1 and sys.argv[1] == "uninterrupted":
        uninterrupted(json.loads(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()

"""Torchrun soak: examples/torchrun_train.py started on a random world size (1-4 ranks), a random
rank SIGKILLed at a random step, again and again; then one last run to the end of the epoch.

    python benchmarks/soak_torchrun.py [--cycles 30] [--mb 2] [--seed 0]

Each cycle starts the example on a random number of ranks (DataLoader workers 0-2 each),
waits until it has trained 1-12 steps past where it resumed, and SIGKILLs one of its ranks
(torchrun then ends the rest). The next cycle resumes from the newest complete checkpoint,
whatever its world size. A last run trains to the end of the data. Counting every start's
steps up to the checkpoint the next start resumed from, every row of the data must be trained
exactly once: lost and repeated rows are reported (both must be 0), with each start's time to
its first trained step. Writes benchmarks/results/soak_torchrun.json.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import time
from collections import Counter

from common import ROOT, WORK, build_shards, write_results

sys.path.insert(0, str(ROOT / "tests"))  # the torchrun harness is the tests'
from beamtok import Dataset

from torchrun_runs import Start, TorchrunJob, read_rows_log, starts_of, trained_rows

SCRIPT = str(ROOT / "examples" / "torchrun_train.py")
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
SEQ_LEN = 128


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--mb", type=float, default=2.0, help="size of the text trained on")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    files = build_shards("soak-torchrun", args.mb, 8)
    root = WORK / "soak-torchrun"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)

    starts: list[Start] = []
    first_batch: list[float] = []

    def launch(cycle: int, world: int, workers: int) -> tuple[TorchrunJob, list[str]]:
        logs = [str(root / f"cycle{cycle:02d}-rows-{rank}.jsonl") for rank in range(world)]
        options = [
            "--data",
            *files,
            "--tokenizer",
            TOKENIZER,
            "--seq-len",
            str(SEQ_LEN),
            "--batch-size",
            "4",
            "--ckpt",
            str(root / "ckpt"),
        ]
        options += [
            "--save-every",
            "4",
            "--rows-log",
            str(root / f"cycle{cycle:02d}-rows-{{rank}}.jsonl"),
            "--num-workers",
            str(workers),
        ]
        return TorchrunJob(world, SCRIPT, options, cwd=str(ROOT)), logs

    def first_step_seen(job: TorchrunJob, logs: list[str]) -> float:
        while not read_rows_log(logs):
            if job.process.poll() is not None:
                break
            time.sleep(0.05)
        return time.monotonic() - job.started

    worlds = []
    for cycle in range(args.cycles):
        world, workers = rng.randint(1, 4), rng.randint(0, 2)
        worlds.append(world)
        job, logs = launch(cycle, world, workers)
        first_batch.append(first_step_seen(job, logs))
        lines = read_rows_log(logs)
        start_step = min((line["step"] for line in lines), default=0)
        kill_at = start_step + rng.randint(1, 12)
        while job.process.poll() is None and not any(line["step"] >= kill_at for line in read_rows_log(logs)):
            time.sleep(0.02)
        victim = rng.randrange(world)
        job.kill_rank(victim)
        done = job.wait(timeout=300)
        starts += starts_of(read_rows_log(logs))
        print(
            f"cycle {cycle}: {world} ranks x {workers} workers, killed rank {victim} at step ~{kill_at}, exit {done.returncode}",
            flush=True,
        )

    job, logs = launch(args.cycles, 4, 1)
    first_batch.append(first_step_seen(job, logs))
    done = job.wait(timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the last run failed:\n{done.stderr[-4000:]}")
    starts += starts_of(read_rows_log(logs))

    every = Counter(
        (int(e["shard"]), int(e["index"]))
        for e in Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(SEQ_LEN)
    )
    trained = trained_rows(starts)
    lost = len(set(every) - set(trained))
    repeated = sum(n - 1 for n in trained.values() if n > 1)
    results = {
        "cycles": args.cycles,
        "world_sizes": worlds,
        "rows": len(every),
        "steps": max(max(s.steps, default=0) for s in starts),
        "lost_rows": lost,
        "repeated_rows": repeated,
        "first_batch_seconds": [round(t, 2) for t in first_batch],
        "first_batch_median_seconds": round(statistics.median(first_batch), 2),
        "first_batch_max_seconds": round(max(first_batch), 2),
    }
    write_results("soak_torchrun.json", results, corpus=f"the shipped prose, {args.mb:g} MB in 8 files")
    print(results)
    if lost or repeated:
        raise SystemExit(f"{lost} rows lost, {repeated} repeated")


if __name__ == "__main__":
    main()

"""torchft soak: three replica groups on a lighthouse, random groups SIGKILLed and started again
cycle after cycle while the others train; then to the end of the data. Run twice on one seeded
schedule: fed by beamtok (``examples/torchft_train.py``: global batches dealt by the quorum)
and fed as torchft's examples feed it (``benchmarks/torchft_sampler_group.py``: torchft's
``DistributedSampler``, a fixed share a group, the loader kept out of the heal).

    python benchmarks/soak_torchft.py [--cycles 8] [--seed 0] [--step-seconds 0.02]

Reports for each: rows lost and rows repeated against the cache's rows read once, committed
steps, the kills, and the median seconds from a restart to the group's first committed step in
which it trained. Writes benchmarks/results/soak_torchft.json.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import statistics
import sys
import time

from common import ROOT, WORK, write_results

sys.path.insert(0, str(ROOT / "tests"))  # the torchft harness is the tests'
from beamtok import Dataset, load_tokenizer

from conftest import cache_without_beam
from torchft_runs import TorchftJob, lost_and_repeated, read_log, rejoin_seconds, trained, trained_by_outcome

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
CORPUS = ROOT / "data" / "corpus"
BATCH = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step-seconds", type=float, default=0.02)
    parser.add_argument("--minutes", type=float, default=10, help="a bound on each run's cycles")
    args = parser.parse_args()

    work = WORK / "soak_torchft"
    shutil.rmtree(work, ignore_errors=True)
    text = Dataset.from_files(str(CORPUS / "shakespeare-{00..03}.jsonl")).tokenize(load_tokenizer(TOKENIZER))
    cache = str(work / "cache")
    cache_without_beam(text.ensure_bos_eos().concat_chunk(128), cache, row_group_rows=64)
    expected = [
        hashlib.blake2b(row.numpy().tobytes(), digest_size=8).hexdigest()
        for batch in Dataset.from_cache(cache).batch(BATCH, tensors="torch").iter()
        for row in batch["input_ids"]
    ]
    data = ["--cache", cache, "--batch-size", str(BATCH)]
    runs = {}
    for name, script in (
        ("beamtok TorchftLoader", str(ROOT / "examples" / "torchft_train.py")),
        ("torchft DistributedSampler", str(ROOT / "benchmarks" / "torchft_sampler_group.py")),
    ):
        job = TorchftJob(work / name.split()[0], data, step_seconds=args.step_seconds, script=script)
        kills, stalled = soak(job, random.Random(args.seed), args.cycles, args.minutes * 60)
        records = read_log(job.log)
        rows = trained(records).rows if script.endswith("torchft_train.py") else trained_by_outcome(records)
        lost, repeated = lost_and_repeated(rows, expected)
        seconds = rejoin_seconds(job, records)
        runs[name] = {
            "rows": len(expected),
            "rows_lost": lost,
            "rows_repeated": repeated,
            "committed_steps": len({r["step"] for r in records if r.get("commit") and r.get("reading")}),
            "kills": kills,
            "restarts": len(job.starts) - job.groups,
            "stalled_at_the_end": stalled,
            "rejoin_to_first_committed_step_s_median": round(statistics.median(seconds), 2) if seconds else None,
            "rejoin_to_first_committed_step_s": [round(s, 2) for s in seconds],
        }
        print(name, runs[name])
    write_results(
        "soak_torchft.json",
        {
            "what": "3 replica groups (one process each, gloo) on a torchft lighthouse (heartbeat timeout 1 s), "
            f"{args.cycles} cycles of 1-2 random groups SIGKILLed mid-run and started again, one seeded schedule "
            "for both loaders, both with min_replicas 2 (a majority; with 1 the lighthouse ran two quorums at once); "
            "rows counted from each group's log of the rows of its committed steps; stalled_at_the_end: the last "
            "group left waiting for a quorum no other group would join (stopped after 20 s without a commit)",
            "command": f"python benchmarks/soak_torchft.py --cycles {args.cycles} --seed {args.seed} "
            f"--step-seconds {args.step_seconds}",
            "runs": runs,
        },
        corpus="data/corpus/shakespeare-{00..03}.jsonl, GPT-2, rows of 128 tokens, batches of 8",
    )


def soak(job: TorchftJob, rng: random.Random, cycles: int, seconds: float) -> tuple[list[list[int]], bool]:
    """Kill 1-2 random groups after 3-10 more committed steps, start them again, wait until they
    train again; ``cycles`` times or until ``seconds`` pass; then run to the end (or until the
    job stalls). Returns the kills and whether it stalled."""
    kills: list[list[int]] = []
    deadline = time.monotonic() + seconds
    job.start()
    try:
        for _ in range(cycles):
            if time.monotonic() > deadline:
                break
            job.wait_steps(job.committed_steps() + rng.randint(3, 10))
            victims = sorted(rng.sample(range(job.groups), rng.choice((1, 1, 2))))
            job.kill(*victims)
            for group in victims:
                job.start_group(group)
            job.wait_rejoined(*victims)
            kills.append(victims)
        return kills, job.finish_or_stall(idle=20)
    finally:
        job.stop()


if __name__ == "__main__":
    main()

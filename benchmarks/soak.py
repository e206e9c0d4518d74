"""Soak test: stream 10x the shipped corpus, SIGKILL the consumer at random moments, resume it
from its last checkpoint in a new process, and check nothing was lost or repeated.

    python benchmarks/soak.py [--copies 10] [--every 25] [--die-after 30 150] [--seed 0]

The corpus is the shipped documents written ``--copies`` times as shards in rotating formats
(.jsonl, .jsonl.gz, .jsonl.zst). The stream is what a training job would run: shard shuffle,
tokenize, BOS/EOS, concat_chunk(512), two open shards, two tokenizer worker processes, a
shuffle window of 256 and batches of 8. A consumer process saves a checkpoint every
``--every`` batches (the state plus a digest of each batch since the last one, written
atomically) and SIGKILLs itself after a random number of delivered batches (counted from its
first batch: on a loaded machine a kill timed from process start could come before any
checkpoint, every time); the driver starts a new one from the latest checkpoint, until the
stream ends. The digests of all checkpoints, in order, must
equal those of one uninterrupted run. Writes benchmarks/results/soak.json.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import zstandard

from common import ROOT, WORK, shipped_documents, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst")


def build_corpus(copies: int) -> list[str]:
    """``copies`` shards, each the shipped documents starting at a different one."""
    docs = shipped_documents()
    paths = []
    for i in range(copies):
        path = WORK / f"soak-{i:02d}{SUFFIXES[i % len(SUFFIXES)]}"
        paths.append(str(path))
        if path.exists():
            continue
        start = i * len(docs) // copies
        data = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in docs[start:] + docs[:start]).encode()
        if path.suffix == ".gz":
            data = gzip.compress(data, mtime=0)
        elif path.suffix == ".zst":
            data = zstandard.ZstdCompressor().compress(data)
        path.write_bytes(data)
    return paths


def dataset(paths: list[str]) -> Any:
    from beamtok import Dataset

    return (
        Dataset.from_files(paths)
        .shuffle_shards(seed=7)
        .tokenize(TOKENIZER)
        .ensure_bos_eos()
        .concat_chunk(512)
        .interleave(2)
        .parallel(2)
        .shuffle(256, seed=1)
        .batch(8)
    )


def digest(batch: dict[str, Any]) -> str:
    return hashlib.blake2b(batch["input_ids"].tobytes(), digest_size=8).hexdigest()


def consume(paths: list[str], run_dir: Path, every: int, die_after: int) -> None:
    """Stream from the latest checkpoint in ``run_dir`` to the end, checkpointing as it goes."""
    checkpoints = sorted(run_dir.glob("ckpt-*.json"))
    state = json.loads(checkpoints[-1].read_text())["state"] if checkpoints else None
    number = len(checkpoints)
    it = dataset(paths).iter(state)
    pending: list[str] = []
    for delivered, batch in enumerate(it, start=1):
        pending.append(digest(batch))
        if len(pending) == every:
            number = _checkpoint(run_dir, number, it.state_dict(), pending)
            pending = []
        if delivered == die_after:
            os.kill(os.getpid(), signal.SIGKILL)  # the worker processes notice their parent is gone
    _checkpoint(run_dir, number, it.state_dict(), pending, done=True)
    it.close()


def _checkpoint(run_dir: Path, number: int, state: dict[str, Any], digests: list[str], done: bool = False) -> int:
    tmp = run_dir / f".ckpt-{number:06d}.tmp"
    tmp.write_text(json.dumps({"state": state, "digests": digests, "done": done}))
    os.replace(tmp, run_dir / f"ckpt-{number:06d}.json")  # atomic: a kill leaves old or new
    return number + 1


def uninterrupted(paths: list[str], out: Path) -> None:
    it = dataset(paths).iter()
    out.write_text(json.dumps([digest(b) for b in it]))
    it.close()


def run_child(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, *args], cwd=Path(__file__).parent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--every", type=int, default=25, help="Batches between checkpoints.")
    parser.add_argument(
        "--die-after",
        type=int,
        nargs=2,
        default=(30, 150),
        metavar=("MIN", "MAX"),
        help="Batches a consumer delivers before it is killed.",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    paths = build_corpus(args.copies)
    corpus_mb = sum(os.path.getsize(p) for p in paths) / 1e6
    print(f"corpus: {len(paths)} shards, {corpus_mb:.1f} MB on disk")

    started = time.perf_counter()
    reference = WORK / "soak-reference.json"
    child = run_child("uninterrupted", json.dumps(paths), str(reference))
    if child.wait() != 0:
        sys.exit("the uninterrupted run failed")
    want = json.loads(reference.read_text())
    reference_seconds = time.perf_counter() - started
    print(f"uninterrupted run: {len(want)} batches in {reference_seconds:.1f} s")

    run_dir = WORK / "soak-run"
    if run_dir.exists():
        for f in run_dir.iterdir():
            f.unlink()
    run_dir.mkdir(exist_ok=True)
    rng = random.Random(args.seed)
    kills = 0
    started = time.perf_counter()
    while True:
        die_after = rng.randint(*args.die_after)
        code = run_child("consume", json.dumps(paths), str(run_dir), str(args.every), str(die_after)).wait()
        if code == -signal.SIGKILL:
            kills += 1
            checkpoints = len(list(run_dir.glob("ckpt-*.json")))
            print(f"  consumer #{kills} killed after {die_after} batches; {checkpoints} checkpoints")
            continue
        if code != 0:
            sys.exit(f"a consumer exited with status {code}")
        break
    checkpoints = sorted(run_dir.glob("ckpt-*.json"))
    got = [d for c in checkpoints for d in json.loads(c.read_text())["digests"]]
    assert json.loads(checkpoints[-1].read_text())["done"]
    same = got == want
    lost = len(set(want) - set(got))
    result = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}",
        "corpus_mb": corpus_mb,
        "batches": len(want),
        "checkpoints": len(checkpoints),
        "kill_resume_cycles": kills,
        "identical_to_uninterrupted": same,
        "seconds_uninterrupted": reference_seconds,
        "seconds_with_kills": time.perf_counter() - started,
    }
    print(json.dumps(result, indent=2))
    write_results("soak.json", result, "the shipped prose (data/corpus), 10 copies in rotating formats")
    if not same:
        sys.exit(f"MISMATCH: {len(got)} batches consumed vs {len(want)}; {lost} reference batches never seen")
    print(f"OK: {kills} kill/resume cycles, {len(got)} batches, identical to the uninterrupted run")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "consume":
        consume(json.loads(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) > 1 and sys.argv[1] == "uninterrupted":
        uninterrupted(json.loads(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()

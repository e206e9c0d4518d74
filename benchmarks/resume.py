"""Resume cost at 10%, 50% and 90% of one large shard: seek, don't replay.

    python benchmarks/resume.py [--mb 24] [--repeats 5]

For an uncompressed JSONL shard of at least 20 MB and its gzip twin, it streams the pipeline
files -> tokenize -> ensure_bos_eos -> concat_chunk(1024) -> batch(8) to 10/50/90% of its
batches, saves the state (JSON), and times a fresh iterator resumed from it up to its first
batch (median of repeats). As a baseline it times what a replaying loader pays: iterating
from the start to the same batch. Prints a table and writes benchmarks/results/resume.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
from typing import Any

from beamtok import Dataset, load_tokenizer

from common import ROOT, build_jsonl, median_seconds, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


def pipeline(url: str) -> Dataset:
    return Dataset.from_files(url).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(1024).batch(8)


def measure(url: str, repeats: int) -> dict[str, Any]:
    total = sum(1 for _ in pipeline(url))
    rows: dict[str, Any] = {"batches": total}
    for pct in (10, 50, 90):
        k = total * pct // 100
        it = pipeline(url).iter()
        for _ in itertools.islice(it, k):
            pass
        state = json.loads(json.dumps(it.state_dict()))
        resume = median_seconds(lambda s=state: next(pipeline(url).iter(s)), repeats)  # type: ignore[misc]
        replay = median_seconds(lambda k=k: next(itertools.islice(pipeline(url).iter(), k, None)), 1)  # type: ignore[misc]
        rows[f"{pct}%"] = {"resume_s": resume, "replay_s": replay, "state_bytes": len(json.dumps(state))}
    rows["ratio_90_to_10"] = rows["90%"]["resume_s"] / rows["10%"]["resume_s"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=24.0, help="shard size in MB (>= 20)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    load_tokenizer(TOKENIZER)  # load once, outside every timing
    plain = build_jsonl("resume", int(args.mb * 1e6), gzip_too=True)
    results = {
        "machine": f"{platform.machine()} {platform.processor() or ''} python {platform.python_version()}".strip(),
        "shard_mb": plain.stat().st_size / 1e6,
        "jsonl": measure(str(plain), args.repeats),
        "jsonl.gz": measure(str(plain.with_suffix(".jsonl.gz")), args.repeats),
    }
    print(f"shard: {results['shard_mb']:.1f} MB uncompressed JSONL ({results['jsonl']['batches']} batches of 8x1024)")
    print(f"{'shard':<10}{'at':>5}{'resume s':>11}{'replay s':>11}{'replay/resume':>15}{'state B':>9}")
    for kind in ("jsonl", "jsonl.gz"):
        for pct in ("10%", "50%", "90%"):
            r = results[kind][pct]
            print(
                f"{kind:<10}{pct:>5}{r['resume_s']:>11.3f}{r['replay_s']:>11.3f}{r['replay_s'] / r['resume_s']:>15.1f}{r['state_bytes']:>9}"
            )
        print(f"{kind:<10} resume at 90% / resume at 10% = {results[kind]['ratio_90_to_10']:.2f}")
    write_results("resume.json", results)


if __name__ == "__main__":
    main()

"""What the tokenizer copy a cache keeps costs, against the cache's own bytes.

    python benchmarks/tokenizer_copy.py [--tokenizer data/tokenizers/gpt2]

Builds a cache of the shipped Shakespeare files packed to 1024 tokens and reports the bytes of
its ``tokenizer.json`` beside the shard bytes per token, so the copy reads as the tokens of
shards it weighs as much as (and its share of a cache of 10 M and of 1 B tokens); the copy
compressed (zlib level 9), what keeping it compressed would save; and the time
``Cache.tokenizer()`` takes to rebuild the tokenizer from it. Writes
benchmarks/results/tokenizer_copy.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import zlib
from pathlib import Path

from beamtok import Dataset
from beamtok._src.cache import Cache

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "tokenizer_copy.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", default=str(ROOT / "data" / "tokenizers" / "gpt2"))
    args = parser.parse_args()
    where = tempfile.mkdtemp(prefix="tokenizer-copy-")
    try:
        root = os.path.join(where, "cache")
        (
            Dataset.from_files(str(ROOT / "data" / "corpus" / "shakespeare-{00..03}.jsonl"))
            .tokenize(args.tokenizer)
            .ensure_bos_eos()
            .concat_chunk(1024)
            .cache(root, progress=False)
        )
        cache = Cache(root)
        copy = Path(root, cache.manifest.tokenizer_file or "tokenizer.json").read_bytes()
        files = [Path(d, f) for d, _, names in os.walk(root) for f in names]
        shard_bytes = sum(p.stat().st_size for p in files if p.suffix == ".parquet")
        tokens = sum(entry.tokens for entry in cache.manifest.shards)
        started = time.perf_counter()
        cache.tokenizer()
        rebuild_s = time.perf_counter() - started
    finally:
        shutil.rmtree(where)
    per_token = shard_bytes / tokens
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/tokenizer_copy.py",
        "tokenizer": os.path.relpath(args.tokenizer, ROOT),
        "copy_bytes": len(copy),
        "copy_zlib9_bytes": len(zlib.compress(copy, 9)),
        "shard_bytes_per_token": round(per_token, 3),
        "copy_weighs_as_tokens": round(len(copy) / per_token),
        "share_of_10M_token_cache": round(len(copy) / (len(copy) + 10e6 * per_token), 4),
        "share_of_1B_token_cache": round(len(copy) / (len(copy) + 1e9 * per_token), 6),
        "rebuild_s": round(rebuild_s, 3),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""What a DistributedLoader's checkpoint value costs at 1,024 and 8,192 ranks.

    python benchmarks/rank_states.py [--workers 2]

One real rank entry (a StatefulDataLoader with ``--workers`` workers part way through the
shipped corpus, split by shards) is measured; the value of a world of N ranks is that entry
for every rank (each with its own rank number), packed as ``state_dict()`` packs it. Reported
per world size: the bytes every rank receives in the gather (JSON), the bytes the checkpoint
holds (compressed, written once), and the seconds to pack and to unpack on one core. Writes
benchmarks/results/rank_states.json.
"""

from __future__ import annotations

import argparse
import copy
import time

import orjson

from beamtok import Dataset
from beamtok._src.distributed.rank_states import pack_rank_states, unpack_rank_states
from beamtok._src.distributed.torch_loader import DistributedLoader

from common import ROOT, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    files = str(ROOT / "data" / "corpus" / "shakespeare-{00..03}.jsonl")
    ds = (
        Dataset.from_files(files)
        .tokenize(str(ROOT / "data" / "tokenizers" / "gpt2"))
        .ensure_bos_eos()
        .concat_chunk(1024)
        .batch(8)
    )
    loader = DistributedLoader(ds, num_workers=args.workers, rank=0, world_size=1)
    batches = iter(loader)
    for _ in range(5):
        next(batches)
    entry = {"rank": 0, "num_workers": args.workers, "replica": False, "loader": loader.loader.state_dict()}
    rows = []
    for world in (1, 64, 1024, 8192):
        entries = []
        for rank in range(world):
            copied = copy.deepcopy(entry)
            copied["rank"] = rank
            entries.append(copied)
        start = time.perf_counter()
        packed = pack_rank_states(entries)
        packed_s = time.perf_counter() - start
        start = time.perf_counter()
        unpack_rank_states(packed)
        unpacked_s = time.perf_counter() - start
        gathered = sum(len(orjson.dumps(e)) for e in entries)
        rows.append(
            {
                "ranks": world,
                "gathered_json_bytes": gathered,
                "checkpoint_bytes": len(packed["states"]),
                "pack_seconds": round(packed_s, 3),
                "unpack_seconds": round(unpacked_s, 3),
            }
        )
        print(rows[-1], flush=True)
    write_results(
        "rank_states.json",
        {"workers_per_rank": args.workers, "entry_json_bytes": len(orjson.dumps(entry)), "worlds": rows},
    )


if __name__ == "__main__":
    main()

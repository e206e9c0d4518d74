"""A job run under torchrun by tests/distributed/test_end_of_data_ranks.py.

``part``: every rank reads a different number of batches (rank r: 2 + 3r, ``even=None``) and
the gathered state is written to ``ROOT/partial.pickle``. ``finish``: at this world size, for
each ``even`` and worker count, a loader resumed from that state reads to the end, counting
real and padding batches and the rows it trained; its state at the end is loaded into a new
loader, which must read nothing. Each rank writes ``ROOT/finish-RANK.json``."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import torch.distributed as dist

from beamtok import Dataset
from beamtok._src.distributed.process_group import end_process_group, start_process_group
from beamtok._src.distributed.torch_loader import DistributedLoader


def stream(files: str, tokenizer: str) -> Dataset:
    return Dataset.from_files(files).tokenize(tokenizer).ensure_bos_eos().concat_chunk(64).batch(4)


def rows_of(batch: dict) -> list[list[int]]:
    return [[int(s), int(i)] for s, i in zip(batch["shard"].tolist(), batch["index"].tolist()) if s >= 0]


def main() -> None:
    phase, root, files, tokenizer = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    rank, _world = start_process_group("gloo")
    if phase == "part":
        loader = DistributedLoader(stream(files, tokenizer), even=None)
        read = []
        for _, batch in zip(range(2 + 3 * rank), loader):
            read += rows_of(batch)
        state = loader.state_dict()
        (root / f"part-{rank}.json").write_text(json.dumps(read))
        if rank == 0:
            (root / "partial.pickle").write_bytes(pickle.dumps(state))  # the packed states hold bytes
    else:
        partial = (root / "partial.pickle").read_bytes()
        report = {}
        for even in ("pad", "drop", None):
            for workers in (0, 2):
                loader = DistributedLoader(stream(files, tokenizer), even=even, num_workers=workers)
                loader.load_state_dict(pickle.loads(partial))
                real, pad, rows = 0, 0, []
                for batch in loader:
                    found = rows_of(batch)
                    real, pad = (real + 1, pad) if found else (real, pad + 1)
                    rows += found
                at_end = loader.state_dict()
                loader.close()
                again = DistributedLoader(stream(files, tokenizer), even=even, num_workers=workers)
                again.load_state_dict(at_end)
                after_end = sum(1 for _ in again)
                again.close()
                report[f"{even}-{workers}"] = {"real": real, "pad": pad, "rows": rows, "after_end": after_end}
                dist.barrier()
        (root / f"finish-{rank}.json").write_text(json.dumps(report))
    end_process_group()


if __name__ == "__main__":
    main()

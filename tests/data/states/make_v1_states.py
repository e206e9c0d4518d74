"""Writes the version-1 states kept beside it, as beamtok 0b0ed29 (the last commit saving
version 1) saved them; test_state_migration.py resumes them with today's beamtok. Run from a
checkout of that commit, in the repository root:

    git worktree add /tmp/v1 0b0ed29 && cd /tmp/v1 && python /path/to/make_v1_states.py OUT_DIR
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

from beamtok import Dataset

TOKENIZER = "data/tokenizers/gpt2"
FILES = ["data/corpus/shakespeare-00.jsonl", "data/corpus/pydocs-00.jsonl.zst", "data/corpus/shakespeare-01.jsonl"]


def packed(seq_len: int = 64) -> Dataset:
    return Dataset.from_files(FILES).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(seq_len)


PIPELINES = {
    "v1_stages": lambda: packed().shuffle_shards(3).shuffle(window=8, seed=2).batch(4).enumerate(),
    "v1_mix": lambda: Dataset.mix(
        [packed(), Dataset.mix([packed(32), packed(48)], [0.5, 0.5], seed=4), packed(80)],
        [0.5, 0.3, 0.2],
        seed=1,
    ).batch(2),
}


def main(out: str) -> None:
    for name, make in PIPELINES.items():
        it = make().iter()
        list(itertools.islice(it, 7))
        Path(out, f"{name}.json").write_text(json.dumps(it.state_dict()))
    ranks = []  # the states of two ranks of one run, for a resume on another world size
    for rank in range(2):
        it = packed().shard_by_rank(rank, 2).batch(3).iter()
        list(itertools.islice(it, 4 + rank))
        ranks.append(it.state_dict())
    Path(out, "v1_two_ranks.json").write_text(json.dumps(ranks))


if __name__ == "__main__":
    main(sys.argv[1])

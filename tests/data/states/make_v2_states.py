"""Writes the version-2 states kept beside it, as beamtok 58e16c0 (the last commit before the
package's internals moved under ``beamtok/_src``) saved them; test_state_migration.py checks
that today's beamtok saves the very same states and resumes them. Run from a checkout of that
commit, in the repository root:

    git worktree add /tmp/v2 58e16c0 && cd /tmp/v2 && python /path/to/make_v2_states.py OUT_DIR
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

from beamtok import Dataset

TOKENIZER = "data/tokenizers/gpt2"
FILES = ["data/corpus/shakespeare-00.jsonl", "data/corpus/pydocs-00.jsonl.zst", "data/corpus/shakespeare-01.jsonl"]
STEPS = 7


def packed(seq_len: int = 64) -> Dataset:
    return Dataset.from_files(FILES).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(seq_len)


PIPELINES = {
    "v2_stages": lambda: packed().shuffle_shards(3).shuffle(window=8, seed=2).batch(4).enumerate(),
    "v2_mix": lambda: Dataset.mix(
        [packed(), Dataset.mix([packed(32), packed(48)], [0.5, 0.5], seed=4), packed(80)],
        [0.5, 0.3, 0.2],
        seed=1,
    ).batch(2),
    "v2_take_pad": lambda: Dataset.from_files(FILES).tokenize(TOKENIZER).pad(96).take(40).batch(5),
    "v2_workers": lambda: packed().interleave(2).parallel(2).batch(3),
}
RANKED = {  # the states of two ranks of one run, for a resume on another world size
    "v2_two_ranks": lambda rank: packed().shard_by_rank(rank, 2).batch(3),
    "v2_two_ranks_even": lambda rank: packed().shard_by_rank(rank, 2, split="examples", even="pad").batch(3),
}


def main(out: str) -> None:
    for name, make in PIPELINES.items():
        with make().iter() as it:
            list(itertools.islice(it, STEPS))
            Path(out, f"{name}.json").write_text(json.dumps(it.state_dict()))
    for name, make_rank in RANKED.items():
        states = []
        for rank in range(2):
            it = make_rank(rank).iter()
            list(itertools.islice(it, 4 + rank))
            states.append(it.state_dict())
        Path(out, f"{name}.json").write_text(json.dumps(states))


if __name__ == "__main__":
    main(sys.argv[1])

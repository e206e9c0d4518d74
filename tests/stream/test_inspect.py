"""`beamtok inspect` is built from each node's own description of its state: every kind of
root, every stage, with and without the pipeline, and an example split after an elastic merge."""

from __future__ import annotations

import json
import re

import pytest

from beamtok import Dataset
from beamtok._src.stream.explain import explain_state

from conftest import CORPUS, TOKENIZER_DIR, cache_without_beam

TOKENIZER = str(TOKENIZER_DIR)
FILES = [
    str(CORPUS / "shakespeare-00.jsonl"),
    str(CORPUS / "shakespeare-01.jsonl"),
    str(CORPUS / "pydocs-00.jsonl.zst"),
]


def packed(files: list[str]) -> Dataset:
    return Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64)


def stages(ds: Dataset) -> Dataset:
    return ds.shuffle(window=8, seed=0).take(40).batch(2).enumerate()


def state_after(ds: Dataset, items: int) -> dict:
    it = ds.iter()
    for _ in range(items):
        next(it)
    return json.loads(json.dumps(it.state_dict()))


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> dict[str, Dataset]:
    cache = cache_without_beam(packed(FILES), str(tmp_path_factory.mktemp("inspect") / "cache"), row_group_rows=8)
    return {
        "shard source": packed(FILES).interleave(2),
        "mix": Dataset.mix([packed(FILES[:2]), packed(FILES[2:])], [0.6, 0.4], seed=1),
        "global shuffle": cache.global_shuffle(seed=3),
    }


# the shuffle's state holds the source where its window began: after 8 examples
ROOT_LINES = {
    "shard source": r"^shard source: epoch 0, 2 shard\(s\) of this epoch's order opened; handed out so far: 8 examples",
    "mix": r"^mix: 8 examples decided so far \(the global index\), stopped: False",
    "global shuffle": r"^global shuffle: epoch 0, position 8 of the epoch's permutation; handed out so far: 8 examples",
}


@pytest.mark.parametrize("kind", sorted(ROOT_LINES))
def test_every_root_and_stage_describes_its_own_state(roots, kind):
    ds = stages(roots[kind])
    state = state_after(ds, 5)  # 10 rows handed out, 16 read into two shuffle windows
    with_pipeline = explain_state(state, ds.pipeline)
    declared = explain_state(state)  # from the parts the state keeps
    for lines in (with_pipeline, declared):
        text = "\n".join(lines)
        assert re.search(ROOT_LINES[kind], text, re.M), text
        assert "stage 1 (shuffle): window 1 (counted over the whole stream), 2 of its examples delivered" in text
        assert "stage 2 (take): 10 items taken" in text
        assert "stage 3 (batch): no position of its own" in text
        assert "stage 4 (enumerate): the next number is 5" in text
    # the same words either way, but for shards named by file (and cursors by what they count
    # in it) where the pipeline is known
    unnamed = [
        re.sub(r"at (byte [\d,]+|line \d+|row [\d,]+),", "at doc cursor ?,", re.sub(r" \([^)]*/[^)]*\)", "", line))
        for line in with_pipeline
    ]
    assert unnamed == [re.sub(r"at doc cursor \d+,", "at doc cursor ?,", line) for line in declared]
    if kind != "global shuffle":
        assert any(FILES[0] in line for line in with_pipeline) and not any(FILES[0] in line for line in declared)


def test_example_split_after_an_elastic_merge_keeps_every_stage_name():
    def ds(rank: int, world: int) -> Dataset:
        return packed(FILES).shard_by_rank(rank, world, split="examples").shuffle(window=4, seed=0).batch(2)

    old = [state_after(ds(rank, 2), 3 + 2 * rank) for rank in range(2)]  # reader 1 ahead of reader 0
    resumed = ds(0, 3).iter_merged(old)
    next(resumed)
    state = json.loads(json.dumps(resumed.state_dict()))
    split = state["pipeline"]["upstream"]["upstream"]
    assert split.get("taken"), split  # positions the faster old reader took, to skip
    for lines in (explain_state(state, ds(0, 3).pipeline), explain_state(state)):
        text = "\n".join(lines)
        assert "reader: rank 0 of 3, DataLoader worker 0 of 1, data split by examples" in text
        assert re.search(
            r"^example split: \d+ examples of the whole stream seen \(this reader keeps every k-th\); \d+ later example",
            text,
            re.M,
        )
        assert re.search(r"^shard source: epoch 0", text, re.M)
        assert "stage 1 (shuffle): window" in text and "stage 2 (batch): no position of its own" in text
        assert "taken" not in text.replace("taken by readers", "")  # never read as take()'s count


def test_a_state_whose_parts_were_not_kept_is_shown_as_saved():
    ds = stages(packed(FILES))
    state = state_after(ds, 2)
    del state["about"], state["plan"]
    lines = explain_state(state)
    assert lines[-1].startswith("pipeline (its parts were not saved with the state): {")
    assert any(line.startswith("stage 1 (shuffle)") for line in explain_state(state, ds.pipeline))


def test_inspect_against_a_cache_directory_takes_the_stream_stages_from_the_state(roots, tmp_path):
    from click.testing import CliRunner

    from beamtok._src.cli import main

    directory = roots["global shuffle"].pipeline.root.base.origin.cache.directory
    for saved in (
        Dataset.from_cache(directory).shuffle(window=8, seed=1).batch(2),  # read from the cache
        packed(FILES).shuffle(window=8, seed=1).batch(2),  # its on-the-fly twin
        roots["global shuffle"].repeat(2).shuffle(window=4).take(9),
    ):
        (tmp_path / "state.json").write_text(json.dumps(state_after(saved, 3)))
        result = CliRunner().invoke(main, ["inspect", str(tmp_path / "state.json"), "--pipeline", directory])
        assert result.exit_code == 0 and result.stdout.rstrip().endswith(f"resumes {directory}"), result.output
        assert "(stream options and stages of the state, read from the cache: epochs=" in result.stdout
    other = Dataset.from_files(FILES).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(32).shuffle(window=8).batch(2)
    (tmp_path / "state.json").write_text(json.dumps(state_after(other, 2)))
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "state.json"), "--pipeline", directory])
    assert result.exit_code == 1 and "does NOT resume" in result.stdout and "seq_len 32 → 64" in result.stdout

"""shard_by_rank(..., even=): every reader ends with the same number of examples (and so of
batches), on uneven data: readers split by examples, by shards of a cache, by global-shuffle
positions; resumable at any point; refused where counts cannot be known."""

from __future__ import annotations

import pytest

from beamtok import ConfigError, Dataset
from beamtok.testing import check_resumption, tiny_tokenizer

from conftest import cache_without_beam, real_paragraphs, write_jsonl

TOKENIZER = tiny_tokenizer()  # a stage test: what a token is does not matter


@pytest.fixture(scope="module")
def uneven(tmp_path_factory) -> list[str]:
    """Three shards of very different sizes."""
    root = tmp_path_factory.mktemp("even")
    paragraphs = real_paragraphs(120)
    sizes = [(0, 70), (70, 85), (85, 120)]
    return [
        str(write_jsonl(root / f"part-{i}.jsonl", [{"text": p} for p in paragraphs[a:b]]))
        for i, (a, b) in enumerate(sizes)
    ]


def packed(files: list[str]) -> Dataset:
    return Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(32)


def provenance(ds: Dataset) -> list[tuple[int, int]]:
    return [(int(ex["shard"]), int(ex["index"])) for ex in ds]


@pytest.mark.parametrize("world", [5, 7, 10])
def test_readers_split_by_examples(uneven, world):
    everything = provenance(packed(uneven))
    total = len(everything)
    assert total % world  # the last round is incomplete for some readers
    dropped = [provenance(packed(uneven).shard_by_rank(r, world, split="examples", even="drop")) for r in range(world)]
    assert {len(d) for d in dropped} == {total // world}
    assert sorted(x for d in dropped for x in d) == sorted(
        everything[: total // world * world]
    )  # the last partial round goes
    padded = [list(packed(uneven).shard_by_rank(r, world, split="examples", even="pad")) for r in range(world)]
    assert {len(p) for p in padded} == {-(-total // world)}
    pads = [ex for p in padded for ex in p if ex["shard"] == -1]
    assert len(pads) == world - total % world
    assert all(
        not ex["segment_ids"].any() and not ex["loss_mask"].any() and ex["input_ids"].shape == (32,) for ex in pads
    )
    assert sorted((int(ex["shard"]), int(ex["index"])) for p in padded for ex in p if ex["shard"] != -1) == sorted(
        everything
    )


@pytest.mark.parametrize("even", ["drop", "pad"])
def test_resumes_exactly_at_every_step(uneven, even):
    check_resumption(
        lambda: packed(uneven).shard_by_rank(4, 5, split="examples", even=even).batch(4), random_steps=6
    )  # 156 rows: 1 over


def test_readers_split_by_shards_of_a_cache_and_by_global_shuffle(uneven, tmp_path):
    cached = cache_without_beam(packed(uneven), str(tmp_path / "c"))
    natural = [len(provenance(cached.shard_by_rank(r, 2))) for r in range(2)]
    assert natural[0] != natural[1]  # shards 0 and 2 against shard 1
    for even, want in (("drop", min(natural)), ("pad", max(natural))):
        batches = [list(cached.shard_by_rank(r, 2, even=even).batch(8)) for r in range(2)]
        assert len(batches[0]) == len(batches[1])  # every rank the same number of batches
        assert [sum(len(b["index"]) for b in rank) for rank in batches] == [want, want]
    check_resumption(lambda: cached.shard_by_rank(1, 2, even="pad").batch(8), random_steps=5)
    shuffled = [provenance(cached.global_shuffle(seed=1).repeat(2).shard_by_rank(r, 3, even="drop")) for r in range(3)]
    assert len({len(s) for s in shuffled}) == 1
    # a spread shuffle's readers own different numbers of holes: the counts come from its order
    spread = cached.global_shuffle(seed=1, spread=3, unit_rows=4).repeat(2)
    uneven_counts = [len(provenance(spread.shard_by_rank(r, 3))) for r in range(3)]
    for even, want in (("drop", min(uneven_counts)), ("pad", max(uneven_counts))):
        assert [len(provenance(spread.shard_by_rank(r, 3, even=even))) for r in range(3)] == [want] * 3, uneven_counts


def test_refused_where_the_counts_cannot_be_known(uneven):
    with pytest.raises(ConfigError, match=r"even='drop' needs every reader's example count before reading"):
        next(iter(packed(uneven).shard_by_rank(0, 2, even="drop")))
    with pytest.raises(ConfigError, match=r"even must be one of 'drop', 'pad'"):
        packed(uneven).shard_by_rank(0, 2, even="same")
    with pytest.raises(ConfigError, match="even='pad' adds padding rows, which needs rows of one width"):
        next(iter(Dataset.from_files(uneven).tokenize(TOKENIZER).shard_by_rank(0, 2, split="examples", even="pad")))


def test_inspect_names_the_even_split(uneven, tmp_path):
    from beamtok._src.stream.explain import explain_state

    cached = cache_without_beam(packed(uneven), str(tmp_path / "c"))
    ds = cached.shard_by_rank(1, 2, even="pad").batch(4)
    it = ds.iter()
    next(it)
    state = it.state_dict()
    for lines in (explain_state(state, ds.pipeline), explain_state(state)):
        text = "\n".join(lines)
        assert "shard source: epoch 0" in text and "even split: 4 examples handed out of this reader's share" in text, (
            text
        )
        assert "stage 1 (batch): no position of its own" in text


def test_a_count_split_refuses_another_world_size_and_names_the_loader_that_can(uneven, tmp_path):
    from beamtok import StateError

    cached = cache_without_beam(packed(uneven), str(tmp_path / "c"))
    its = [cached.shard_by_rank(r, 2, even="pad").iter() for r in range(2)]
    for it in its:
        next(it)
    states = [it.state_dict() for it in its]
    with pytest.raises(
        StateError,
        match=r"each reader's count was its share of the old split \(2 ranks\).*DistributedLoader\(even=\.\.\.\)",
    ):
        next(cached.shard_by_rank(0, 3, even="pad").iter_merged(states))

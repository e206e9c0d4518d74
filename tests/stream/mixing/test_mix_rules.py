"""Weighted mixing: exact proportions in every block, stop rules, weight schedules, exact
resume (also across modes, with a cached source), independence of worker counts."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from beamtok import ConfigError, Dataset
from beamtok._src.stream.mixing.mix_plan import block_counts
from beamtok.testing import assert_items_equal, check_equivalent, check_resumption

from conftest import CORPUS, ROOT

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


def source(pattern: str, seq_len: int = 64) -> Dataset:
    return Dataset.from_files(str(CORPUS / pattern)).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(seq_len)


@pytest.fixture(scope="module")
def sources() -> list[Dataset]:
    """Three real sources of different sizes: Shakespeare (2 shards), Python docs, Milton."""
    return [
        source("shakespeare-{00..01}.jsonl"),
        source("pydocs-00.jsonl.zst"),
        source("milton/allegro.txt", seq_len=32),
    ]


def test_largest_remainder_keeps_every_weight():
    assert block_counts([0.5, 0.3, 0.2], 10) == [5, 3, 2]
    assert block_counts([0.74, 0.26], 10) == [7, 3]
    assert block_counts([1, 1, 1], 100) == [34, 33, 33]
    assert block_counts([0.999, 0.001], 1000) == [999, 1]
    assert sum(block_counts([0.37, 0.21, 0.42], 997)) == 997


def test_every_block_holds_exact_counts_in_its_own_order(sources):
    ds = Dataset.mix(sources[:2], [0.7, 0.3], seed=3, block_size=50)
    picks = [ex["source"] for ex in itertools.islice(ds, 1000)]
    blocks = [picks[b : b + 50] for b in range(0, 1000, 50)]
    assert all(Counter(block) == {0: 35, 1: 15} for block in blocks)
    assert len({tuple(block) for block in blocks}) == len(blocks)  # each block is ordered by its own permutation
    other_seed = [
        ex["source"] for ex in itertools.islice(Dataset.mix(sources[:2], [0.7, 0.3], seed=4, block_size=50), 1000)
    ]
    assert other_seed != picks


def test_each_source_keeps_its_own_order(sources):
    mixed = list(itertools.islice(Dataset.mix(sources[:2], [0.6, 0.4], block_size=20), 400))
    for i, src in enumerate(sources[:2]):
        own = [(ex["shard"], ex["index"]) for ex in mixed if ex["source"] == i]
        assert own == [(ex["shard"], ex["index"]) for ex in itertools.islice(src, len(own))]


def test_a_tiny_weight_keeps_its_rate():
    a = Dataset.from_sequence([f"a{i}" for i in range(5000)])
    b = Dataset.from_sequence([f"b{i}" for i in range(50)])
    ds = Dataset.mix([a, b], [0.999, 0.001], block_size=2000)
    picks = [ex["source"] for ex in itertools.islice(ds, 8000)]
    assert [picks[k : k + 2000].count(1) for k in range(0, 8000, 2000)] == [2, 2, 2, 2]
    with pytest.raises(ConfigError, match="gets no example in a block of 500; use block_size >= 1000"):
        Dataset.mix([a, b], [0.999, 0.001], block_size=500)
    assert Dataset.mix([a, b], [0.9999, 0.0001]).pipeline.root.plan.block_size == 10000  # default grows to fit


def test_stop_rules(sources):
    small, big = sources[2], sources[0]
    n_small = len(list(small))
    first = list(Dataset.mix([big, small], [0.5, 0.5], stop="first_exhausted", block_size=10))
    order = [ex["source"] for ex in itertools.islice(Dataset.mix([big, small], [0.5, 0.5], block_size=10), 3 * n_small)]
    beyond = [i for i, s in enumerate(order) if s == 1][n_small]  # the first draw past the small source's end
    assert sum(ex["source"] == 1 for ex in first) == n_small and len(first) == beyond
    both = Dataset.mix([big, small], [0.5, 0.5], stop="all_exhausted", block_size=10).iter()
    out = list(both)
    seen_big = {(ex["shard"], ex["index"]) for ex in out if ex["source"] == 0}
    assert seen_big == {(ex["shard"], ex["index"]) for ex in big}  # the big one ran out exactly once
    assert both.stats()["sources"][1]["epoch"] > 0 and both.stats()["sources"][0]["epoch"] == 1
    forever = list(itertools.islice(Dataset.mix([big, small], [0.5, 0.5], block_size=10), 4 * n_small))
    assert len(forever) == 4 * n_small  # "never": the small source restarts


def test_weight_schedule_changes_at_a_block_boundary_and_resumes(sources):
    make = lambda: Dataset.mix(sources[:2], [(0, [0.9, 0.1]), (200, [0.2, 0.8])], block_size=50).take(400)  # noqa: E731
    picks = [ex["source"] for ex in make()]
    assert picks[:200].count(1) == 20 and picks[200:].count(1) == 160
    check_resumption(make, steps=[0, 150, 199, 200, 201, 399, 400])
    with pytest.raises(ConfigError, match="not at a block boundary"):
        Dataset.mix(sources[:2], [(0, [1, 1]), (30, [1, 2])], block_size=50)


def test_mix_resumes_exactly_with_stream_stages(sources):
    make = lambda: (  # noqa: E731
        Dataset.mix(sources, [0.5, 0.3, 0.2], seed=7, block_size=64).shuffle(window=16, seed=1).batch(4).take(120)
    )
    report = check_resumption(make, random_steps=12, seed=2)
    assert report.max_state_bytes < 4096


def test_state_does_not_grow_with_the_position(sources):
    it = Dataset.mix(sources, [0.5, 0.3, 0.2], block_size=64).iter()
    sizes = []
    for n in (10, 2000):
        for _ in range(n):
            next(it)
        sizes.append(len(json.dumps(it.state_dict())))
    assert sizes[1] < sizes[0] + 64  # a few more digits, never a buffer


def test_stats_report_each_source_and_the_realised_proportions(sources):
    it = Dataset.mix(sources[:2], [0.75, 0.25], block_size=40).iter()
    out = list(itertools.islice(it, 400))
    stats = it.stats()
    assert stats["proportions"] == [0.75, 0.25] and stats["examples"] == 400
    assert [s["examples"] for s in stats["sources"]] == [300, 100]
    assert (
        stats["tokens"]
        == sum(s["tokens"] for s in stats["sources"])
        == sum(int((e["segment_ids"] > 0).sum()) for e in out)
    )
    assert stats["documents"]["read"] == sum(s["documents"]["read"] for s in stats["sources"])


def test_the_mix_does_not_depend_on_tokenization_workers(sources):
    plain = Dataset.mix(sources, [0.5, 0.3, 0.2], block_size=32)
    workers = Dataset.mix(
        [sources[0].interleave(2).parallel(2), sources[1], sources[2]], [0.5, 0.3, 0.2], block_size=32
    )
    want = list(
        itertools.islice(
            Dataset.mix([sources[0].interleave(2), sources[1], sources[2]], [0.5, 0.3, 0.2], block_size=32), 600
        )
    )
    assert_items_equal(list(itertools.islice(workers, 600)), want)
    assert plain.spec_fingerprint != Dataset.mix(sources, [0.5, 0.2, 0.3], block_size=32).spec_fingerprint


def test_ranks_splitting_examples_share_one_global_mix(sources):
    mix = Dataset.mix(sources, [0.5, 0.3, 0.2], seed=5, block_size=32)
    full = [(e["source"], e["shard"], e["index"]) for e in mix.take(300)]
    ranks = [
        [(e["source"], e["shard"], e["index"]) for e in mix.shard_by_rank(r, 3, split="examples").take(100)]
        for r in range(3)
    ]
    assert [x for trio in zip(*ranks) for x in trio] == full


def test_a_cached_source_is_its_on_the_fly_twin(sources, tmp_path):
    pytest.importorskip("apache_beam")
    cached = sources[1].cache(str(tmp_path / "pydocs"), row_group_rows=8)
    fly = lambda: Dataset.mix(sources, [0.5, 0.3, 0.2], seed=2, block_size=32).shuffle(8, seed=1).take(300)  # noqa: E731
    mixed = lambda: (  # noqa: E731
        Dataset.mix([sources[0], cached, sources[2]], [0.5, 0.3, 0.2], seed=2, block_size=32)
        .shuffle(8, seed=1)
        .take(300)
    )
    check_equivalent(fly, mixed, random_steps=6, seed=4)


def test_mistakes_are_refused(sources):
    with pytest.raises(ConfigError, match="2 weights for 3 sources"):
        Dataset.mix(sources, [1, 2])
    with pytest.raises(ConfigError, match="non-negative"):
        Dataset.mix(sources[:2], [1, -1])
    with pytest.raises(ConfigError, match="has stream stages"):
        Dataset.mix([sources[0].batch(2), sources[1]])
    with pytest.raises(ConfigError, match="sets repeat"):
        Dataset.mix([sources[0].repeat(2), sources[1]])
    mix = Dataset.mix(sources[:2])
    with pytest.raises(ConfigError, match="set it on each source"):
        mix.shuffle_shards(1)
    with pytest.raises(ConfigError, match="set it on each source"):
        mix.concat_chunk(8)
    with pytest.raises(ConfigError, match="one spec per source"):
        mix.spec  # noqa: B018


def test_shard_split_readers_share_one_sequence_of_sources():
    """Readers that split by shards each read their own shards, but taken in turn they give
    the sources in exactly the order of one reader: every block's counts hold over all readers."""
    shards = [source("shakespeare-{00..03}.jsonl", seq_len=32), source("pydocs-{00..03}.jsonl.zst", seq_len=32)]
    mix = Dataset.mix(shards, [0.7, 0.3], seed=5, block_size=20)
    one = [ex["source"] for ex in itertools.islice(mix, 120)]
    for parts in (2, 3, 4):
        readers = [iter(mix.shard_by_rank(r, parts)) for r in range(parts)]
        turns = [next(readers[k % parts])["source"] for k in range(120)]
        assert turns == one, f"{parts} readers"
        owned = [
            {ex["shard"] for ex in mix.shard_by_rank(r, parts).take(60) if ex["source"] == 0} for r in range(parts)
        ]
        assert all(not a & b for a, b in itertools.combinations(owned, 2))  # each reads its own shards


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 2), (2, 1), (1, 4)])
def test_sequence_of_sources_continues_on_another_world_size(old, new):
    shards = [source("shakespeare-{00..03}.jsonl", seq_len=32), source("pydocs-{00..03}.jsonl.zst", seq_len=32)]
    mix = Dataset.mix(shards, [0.7, 0.3], seed=5, block_size=20)
    one = [ex["source"] for ex in itertools.islice(mix, 200)]
    for ahead in (0, 1):  # old readers in step, or reader 0 one example ahead
        readers = [mix.shard_by_rank(r, old).iter() for r in range(old)]
        taken = 7 * old + ahead
        turns = [next(readers[k % old])["source"] for k in range(taken)]
        assert turns == one[:taken]
        states = [it.state_dict() for it in readers]
        resumed = [mix.shard_by_rank(r, new).iter_merged(states) for r in range(new)]
        rest = [next(resumed[k % new])["source"] for k in range(60)]
        assert rest == one[taken : taken + 60], f"{old} -> {new} readers, ahead={ahead}"


def test_dataloader_workers_give_the_one_sequence_of_sources():
    pytest.importorskip("torchdata")
    from torchdata.stateful_dataloader import StatefulDataLoader

    shards = [source("shakespeare-{00..03}.jsonl", seq_len=32), source("pydocs-{00..03}.jsonl.zst", seq_len=32)]
    mix = Dataset.mix(shards, [0.7, 0.3], seed=5, block_size=20)
    one = [ex["source"] for ex in itertools.islice(mix, 90)]
    for workers in (2, 3):
        loader = StatefulDataLoader(mix.to_torch(), batch_size=None, num_workers=workers)
        assert [int(ex["source"]) for ex in itertools.islice(loader, 90)] == one, f"{workers} workers"

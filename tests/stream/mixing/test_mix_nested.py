"""A mix as a source of another mix, nested: it keeps its own rule (a schedule, a stop rule),
each position the outer mix draws for it takes its next example; it resumes at any point,
on another world size and across modes; readers splitting by examples seek it when its
sources are caches; what cannot be nested is refused; a mix of constant weights flattens
where asked (or by default) as before."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from beamtok import ConfigError, Dataset
from beamtok._src.stream.mixing.mix_plan import block_counts
from beamtok._src.stream.mixing.rows import MixRows
from beamtok._src.stream.mixing.seeking import SeekingMix
from beamtok.testing import assert_items_equal, check_resumption, tiny_tokenizer

from conftest import CORPUS, cache_without_beam, inspect_state

TOKENIZER = tiny_tokenizer()
BLOCK = 16
SCHEDULE = [(0, [3, 1]), (2 * BLOCK, [1, 3])]  # the inner mix's weights change at its example 32


pytestmark = pytest.mark.filterwarnings("ignore:mix sources make rows of different lengths")


def on_the_fly() -> list[Dataset]:
    """Three sources of three or four shards each, rows of three lengths."""

    def source(pattern: str, seq_len: int) -> Dataset:
        return Dataset.from_files(str(CORPUS / pattern)).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(seq_len)

    return [
        source("shakespeare-{00..03}.jsonl", 8192),
        source("pydocs-{00..03}.jsonl.zst", 1024),
        source("milton/{allegro,comus,poems}.txt", 512),
    ]


@pytest.fixture(scope="module")
def twins(tmp_path_factory) -> tuple[list[Dataset], list[Dataset]]:
    fly = on_the_fly()
    where = tmp_path_factory.mktemp("caches")
    cached = [cache_without_beam(ds, str(where / f"source-{i}"), row_group_rows=8) for i, ds in enumerate(fly)]
    return fly, cached


def nested(sources: list[Dataset], **outer) -> Dataset:
    inner = Dataset.mix(sources[:2], SCHEDULE, seed=5, block_size=BLOCK)
    return Dataset.mix([inner, sources[2]], outer.pop("weights", [1, 1]), seed=9, block_size=BLOCK, **outer)


def key(example) -> tuple[int, int, int, int]:
    return int(example["source"]), int(example["shard"]), int(example["index"]), int(example["input_ids"][0])


def test_an_inner_mix_keeps_its_schedule_and_its_order(twins):
    fly, _ = twins
    got = list(itertools.islice(nested(fly), 400))
    outer = nested(fly).pipeline.root.plan
    assert len(nested(fly).pipeline.root.mixed) == 2  # not flattened: a schedule has no meaning once flattened
    inner_alone = iter(Dataset.mix(fly[:2], SCHEDULE, seed=5, block_size=BLOCK))
    third_alone = iter(fly[2].repeat())
    want = []
    for position in range(400):
        chosen = int(outer.block_order(position // BLOCK)[position % BLOCK])
        example = next(inner_alone) if chosen == 0 else {**next(third_alone), "source": 2}
        want.append(example)  # ``source`` numbers the leaves: the inner mix's 0 and 1, then 2
    assert_items_equal(got, want)
    for b in range(0, 400 - BLOCK, BLOCK):  # the outer rule holds block by block
        assert Counter(int(e["source"]) == 2 for e in got[b : b + BLOCK]) == dict(
            enumerate(block_counts([1, 1], BLOCK))
        )


@pytest.mark.parametrize("mode", ["shards", "examples"])
def test_a_nested_mix_resumes_exactly_at_many_points(twins, mode):
    fly, _ = twins
    make = lambda: nested(fly).shard_by_rank(1, 2, split=mode).take(150).batch(3)  # noqa: E731
    report = check_resumption(make, random_steps=6, seed=3)
    assert report.total_items == 50


def test_a_world_size_change_keeps_every_inner_source_exact(twins):
    """Readers splitting by shards each read their own shards of every leaf; after 2 -> 3
    readers, no leaf example is lost or read twice within the first epochs."""
    fly, _ = twins
    mixed = Dataset.mix(
        [Dataset.mix(fly[:2], [1, 1], seed=5, block_size=BLOCK, stop="first_exhausted"), fly[2]],
        [3, 1],
        seed=9,
        block_size=BLOCK,
        max_epochs=[1, None],
    )
    old = [mixed.shard_by_rank(r, 2).iter() for r in range(2)]
    seen: Counter[tuple[int, int, int]] = Counter()
    for k in range(60):
        e = next(old[k % 2])
        seen[(int(e["source"]), int(e["shard"]), int(e["index"]))] += 1
    states = [json.loads(json.dumps(it.state_dict())) for it in old]
    for r in range(3):
        for e in itertools.islice(mixed.shard_by_rank(r, 3).iter_merged(states), 400):
            seen[(int(e["source"]), int(e["shard"]), int(e["index"]))] += 1
    inner_seen = [k for k, n in seen.items() if k[0] == 0]
    assert all(seen[k] == 1 for k in inner_seen), "an inner example was read twice"


def test_readers_splitting_by_examples_seek_a_nested_mix_of_caches(twins):
    fly, cached = twins
    for rank in range(3):
        it = nested(cached).shard_by_rank(rank, 3, split="examples").iter()
        assert isinstance(it.source, SeekingMix) and isinstance(it.source.rows[0], MixRows)
        read = nested(fly).shard_by_rank(rank, 3, split="examples").iter()
        assert [key(e) for e in itertools.islice(it, 300)] == [key(e) for e in itertools.islice(read, 300)], (
            f"reader {rank}"
        )


def test_three_levels_seek_as_they_read_and_number_every_leaf(twins):
    def deep(sources: list[Dataset]) -> Dataset:
        middle = Dataset.mix(
            [Dataset.mix(sources[:2], SCHEDULE, seed=5, block_size=BLOCK), sources[2]], [1, 1], seed=6, block_size=BLOCK
        )
        return Dataset.mix([middle, sources[1]], [2, 1], seed=7, block_size=BLOCK, flatten=False)

    fly, cached = twins
    it = deep(cached).shard_by_rank(1, 2, split="examples").iter()
    assert isinstance(it.source.rows[0].sources[0], MixRows)
    got = [key(e) for e in itertools.islice(it, 400)]
    assert got == [key(e) for e in itertools.islice(deep(fly).shard_by_rank(1, 2, split="examples"), 400)]
    assert {k[0] for k in got} == {0, 1, 2, 3}  # a, b, c inside, then b again outside


def test_a_seeking_state_of_a_nested_mix_resumes_the_reading_one(twins):
    fly, cached = twins
    for step in (0, 7, 40):
        it = nested(cached).shard_by_rank(2, 3, split="examples").batch(2).iter()
        list(itertools.islice(it, step))
        state = json.loads(json.dumps(it.state_dict()))
        want = list(itertools.islice(it, 30))
        resumed = nested(fly).shard_by_rank(2, 3, split="examples").batch(2).iter(state)
        assert_items_equal(list(itertools.islice(resumed, 30)), want, f"after {step} batches: ")


def test_a_mix_that_ends_is_read_once(twins):
    fly, _ = twins
    inner = Dataset.mix(fly[:2], [1, 1], seed=5, block_size=BLOCK, stop="first_exhausted")
    whole_inner = [key(e) for e in inner]
    out = list(
        itertools.islice(Dataset.mix([inner, fly[2]], [1, 1], seed=9, block_size=BLOCK, max_epochs=[1, None]), 3000)
    )
    assert [key(e) for e in out if e["source"] < 2] == whole_inner
    assert sum(1 for e in out if e["source"] == 2) == 3000 - len(whole_inner)  # the other source fills the stream on
    first = [key(e) for e in Dataset.mix([inner, fly[2]], [1, 1], seed=9, block_size=BLOCK, stop="first_exhausted")]
    assert [k for k in first if k[0] < 2] == whole_inner[: len([k for k in first if k[0] < 2])]
    assert len(first) < 2 * len(whole_inner) + BLOCK  # it ends when the inner mix (or the third source) does


def test_what_cannot_nest_is_refused_by_name(twins):
    fly, _ = twins
    ends = Dataset.mix(fly[:2], [1, 1], stop="first_exhausted")
    with pytest.raises(ConfigError, match=r"mix source 0 is a mix that ends.*max_epochs=1"):
        Dataset.mix([ends, fly[2]])
    with pytest.raises(ConfigError, match="a mix cannot be restarted"):
        Dataset.mix([ends, fly[2]], stop="all_exhausted")
    with pytest.raises(ConfigError, match="never ends: max_epochs"):
        Dataset.mix([Dataset.mix(fly[:2]), fly[2]], max_epochs=[2, None], flatten=False)
    with pytest.raises(ConfigError, match=r"flatten=True.*weight schedule"):
        Dataset.mix([Dataset.mix(fly[:2], SCHEDULE, block_size=BLOCK), fly[2]], flatten=True)


def test_constant_mixes_flatten_by_default_and_nest_when_asked(twins):
    fly, _ = twins
    inner = Dataset.mix(fly[:2], [1, 3])
    flat = Dataset.mix([inner, fly[2]], [2, 2], block_size=BLOCK)
    assert flat.pipeline.root.plan.schedule == ((0, (0.5, 1.5, 2.0)),)
    kept = Dataset.mix([inner, fly[2]], [2, 2], block_size=BLOCK, flatten=False)
    assert len(kept.pipeline.root.mixed) == 2 and kept.pipeline.root.plan.schedule == ((0, (2.0, 2.0)),)
    assert kept.pipeline.stream_fingerprint != flat.pipeline.stream_fingerprint
    renested = Dataset.mix([Dataset.mix(fly[:2], [3, 1]), fly[2]], [2, 2], block_size=BLOCK, flatten=False)
    assert renested.pipeline.stream_fingerprint != kept.pipeline.stream_fingerprint  # the inner rule is fingerprinted


def test_a_nested_state_explains_itself(twins, tmp_path):
    fly, _ = twins
    it = nested(fly).iter()
    list(itertools.islice(it, 21))
    shown = inspect_state(it.state_dict(), tmp_path)
    assert shown.count("examples decided so far") == 2, shown  # the outer mix's position, and the inner one's
    assert "mix source 0:" in shown and "mix source 1:" in shown

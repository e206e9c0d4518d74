"""A mix of caches split by examples seeks its sources: the closed-form positions agree with
walking the blocks; the seeking mix gives the reading mix's examples in its order under every
stop rule, cap, schedule and weight change; it resumes at any point, across modes and on
another world size; a reader reads only the rows it keeps; its state is one integer a source."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok import Dataset, InputError, StateError
from beamtok._src.stream.mixing.mix_plan import MixPlan
from beamtok._src.stream.mixing.positions import MixPositions
from beamtok._src.stream.mixing.seeking import SeekingMix
from beamtok.testing import assert_items_equal, check_resumption, tiny_tokenizer

from conftest import CORPUS, cache_without_beam

TOKENIZER = tiny_tokenizer()
BLOCK = 32


def on_the_fly() -> list[Dataset]:
    """Three sources that each end within a test's reach (rows an epoch: 246, 248, 128), two
    shards in the first."""

    def source(pattern: str, seq_len: int) -> Dataset:
        return Dataset.from_files(str(CORPUS / pattern)).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(seq_len)

    return [
        source("shakespeare-{00..01}.jsonl", 8192),
        source("pydocs-00.jsonl.zst", 1024),
        source("milton/allegro.txt", 512),
    ]


@pytest.fixture(scope="module")
def twins(tmp_path_factory) -> tuple[list[Dataset], list[Dataset]]:
    """The sources on the fly, and the same as caches of small row groups (shard order shuffled
    in the first, so an epoch's order matters)."""
    fly = on_the_fly()
    where = tmp_path_factory.mktemp("caches")
    cached = [cache_without_beam(ds, str(where / f"source-{i}"), row_group_rows=8) for i, ds in enumerate(fly)]
    fly[0], cached[0] = fly[0].shuffle_shards(7), cached[0].shuffle_shards(7)
    return fly, cached


def key(example) -> tuple[int, int, int]:
    return int(example["source"]), int(example["shard"]), int(example["index"])


def readers(sources: list[Dataset], parts: int, **mix) -> list[Dataset]:
    weights = mix.pop("weights", [0.5, 0.3, 0.2])
    mixed = Dataset.mix(sources, weights, seed=3, block_size=BLOCK, **mix)
    return [mixed.shard_by_rank(r, parts, split="examples") for r in range(parts)]


# ------------------------------------------------------------ closed-form positions


@settings(max_examples=40, deadline=None)
@given(
    weights=st.lists(st.integers(0, 5), min_size=2, max_size=4).filter(lambda ws: sum(ws) > 0),
    later=st.lists(st.integers(1, 5), min_size=4, max_size=4),
    stage_block=st.integers(1, 4),
    seed=st.integers(0, 1000),
)
def test_closed_form_positions_agree_with_walking_the_blocks(weights, later, stage_block, seed):
    n = len(weights)
    plan = MixPlan.make(n, [(0, weights), (stage_block * 16, later[:n])], seed=seed, stop="never", block_size=16)
    walked = np.concatenate([plan.block_order(b) for b in range(12)])
    positions = MixPositions(plan)
    for g in range(0, 190, 7):
        before = np.bincount(walked[:g], minlength=n)
        assert positions.draws_before(g).tolist() == before.tolist()
        assert positions.locate(g) == (int(walked[g]), int(before[walked[g]]))
    for s in range(n):
        drawn = np.flatnonzero(walked == s)
        for d in range(0, len(drawn) - 20, 5):  # the last blocks walked may end inside a stage
            assert positions.draw_position(s, d) == drawn[d]


def test_a_source_without_weight_from_some_stage_is_never_drawn_again():
    plan = MixPlan.make(2, [(0, [1, 1]), (32, [1, 0])], seed=0, stop="never", block_size=16)
    assert MixPositions(plan).draw_position(1, 16) is None
    assert MixPositions(plan).draw_position(1, 15) is not None


# ------------------------------------------------------------ same examples, same order

RULES = [
    {},
    {"stop": "first_exhausted"},
    {"stop": "all_exhausted"},
    {"max_epochs": [1, 2, 1]},
    {"max_epochs": 1, "weights": [(0, [1, 1, 0]), (64, [0, 2, 1]), (160, [1, 0, 3])]},
    {"stop": "all_exhausted", "weights": [(0, [1, 1, 1]), (96, [2, 0, 1])]},
]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()) or "never")
@pytest.mark.parametrize("parts", [1, 3])
def test_the_seeking_mix_is_the_reading_mix(twins, rule, parts):
    fly, cached = twins
    for rank, (reading, seeking) in enumerate(
        zip(readers(fly, parts, **dict(rule)), readers(cached, parts, **dict(rule)))
    ):
        it = seeking.iter()
        assert isinstance(it.source, SeekingMix)
        read = reading.iter()
        want = [key(e) for e in itertools.islice(read, 1500)]
        got = [key(e) for e in itertools.islice(it, 1500)]
        assert got == want, f"reader {rank} of {parts}"
        ended = [s["pipeline"]["upstream"] for s in (read.state_dict(), it.state_dict())]
        assert (
            ended[1]["index"] == ended[0]["index"] and ended[1]["stopped"] == ended[0]["stopped"]
        )  # where it stopped, too


def test_every_reader_keeps_its_turns_of_the_one_mix(twins):
    _, cached = twins
    (one,) = readers(cached, 1)
    whole = [key(e) for e in itertools.islice(one, 600)]
    turns = [[key(e) for e in itertools.islice(r, 200)] for r in readers(cached, 3)]
    assert [x for trio in zip(*turns) for x in trio] == whole


# ------------------------------------------------------------ resume


def test_resumes_exactly_at_many_points(twins):
    _, cached = twins
    make = lambda: readers(cached, 3, max_epochs=1)[1].shuffle(8, seed=2).batch(3)  # noqa: E731
    report = check_resumption(make, random_steps=8, seed=5)
    assert len(report.steps_checked) >= 8 and report.total_items > 60  # batches of 3, to the end of the capped mix


@pytest.mark.parametrize("direction", ["cached to on the fly", "on the fly to cached"])
def test_a_state_crosses_modes(twins, direction):
    fly, cached = twins
    first, second = (cached, fly) if direction == "cached to on the fly" else (fly, cached)
    for step in (0, 5, 41):
        it = readers(first, 3, stop="all_exhausted")[2].batch(2).iter()
        list(itertools.islice(it, step))
        state = json.loads(json.dumps(it.state_dict()))
        rest = list(it)
        resumed = readers(second, 3, stop="all_exhausted")[2].batch(2).iter(state)
        got = [next(resumed)] if rest else []
        if step and direction == "cached to on the fly":  # the sources read through to their positions, uncounted
            assert resumed.stats()["examples"] <= state["pipeline"]["upstream"]["upstream"]["stats"]["examples"] + 3 * 2
        assert_items_equal(got + list(resumed), rest, f"{direction}, after {step} batches: ")


def test_a_world_size_change_loses_and_repeats_nothing(twins):
    _, cached = twins
    seen: Counter[tuple[int, int, int]] = Counter()
    old = [r.iter() for r in readers(cached, 3, max_epochs=1)]
    for k in range(3 * 40 + 3):  # reader 0 three examples ahead: the new readers skip what it took
        seen[key(next(old[0 if k >= 120 else k % 3]))] += 1
    states = [json.loads(json.dumps(it.state_dict())) for it in old]
    assert any(
        s["pipeline"].get("taken")
        for s in [*states, *(r.iter_merged(states).state_dict() for r in readers(cached, 2, max_epochs=1))]
    )
    pristine = json.loads(json.dumps(states))
    new = [r.iter_merged(states) for r in readers(cached, 2, max_epochs=1)]
    for it in new:
        seen.update(key(e) for e in it)
    assert states == pristine  # merging reads the old states, never changes them
    (whole,) = readers(cached, 1, max_epochs=1)
    assert seen == Counter(key(e) for e in whole)


def test_weight_changes_while_training_match_the_reading_mix(twins):
    fly, cached = twins
    out = []
    for sources in (fly, cached):
        it = readers(sources, 2)[1].iter()
        got = [key(e) for e in itertools.islice(it, 30)]
        assert it.set_weights([1, 0, 4]) == 64  # 60 positions taken by two readers in step: the boundary is 64
        got += [key(e) for e in itertools.islice(it, 100)]
        state = json.loads(json.dumps(it.state_dict()))
        resumed = readers(sources, 2)[1].iter(state)
        got += [key(e) for e in itertools.islice(resumed, 50)]
        out.append(got)
    assert out[0] == out[1]


# ------------------------------------------------------------ what a reader reads and keeps


def test_a_reader_decodes_only_the_row_groups_of_its_examples(twins):
    _, cached = twins
    parts = 40
    it = readers(cached, parts)[7].iter()
    kept = list(itertools.islice(it, 5))
    assert len(kept) == 5
    source = it.source
    assert isinstance(source, SeekingMix)
    assert (
        source.rows[0].rows.pool.groups_decoded <= 5
    )  # one row group per example kept, at most (the whole mix: 200 passed)
    assert source.stats_json()["examples"] == 5


def test_the_state_is_one_integer_a_source_and_is_checked(twins):
    _, cached = twins
    it = readers(cached, 4)[1].iter()
    sizes = []
    for n in (5, 400):
        list(itertools.islice(it, n))
        sizes.append(len(json.dumps(it.state_dict())))
    assert sizes[1] < sizes[0] + 32
    state = json.loads(json.dumps(it.state_dict()))
    mix_state = state["pipeline"]["upstream"]
    assert (
        sorted(mix_state) == ["index", "kind", "positions", "stats", "stopped"] and mix_state["kind"] == "seeking_mix"
    )
    assert len(mix_state["positions"]) == 3 and all(isinstance(p, int) for p in mix_state["positions"])
    mix_state["positions"][0] += 1
    with pytest.raises(StateError, match="do not follow from global position"):
        next(readers(cached, 4)[1].iter(state))


def test_a_state_grows_by_a_few_bytes_a_source(twins):
    """A source adds its position and its weight to a state, not its plan or its shard list
    (equal source plans are kept once; ``about`` names the first 16 sources one by one)."""
    _, cached = twins
    sizes = {}
    for n in (20, 60):
        it = Dataset.mix([cached[2]] * n, seed=1).shard_by_rank(3, 8, split="examples").batch(2).iter()
        next(it)
        sizes[n] = len(json.dumps(it.state_dict()))
    assert (sizes[60] - sizes[20]) / 40 <= 16, sizes


def test_a_seeking_state_explains_itself(twins):
    from beamtok._src.stream.explain import explain_state

    _, cached = twins
    it = readers(cached, 3)[1].batch(2).iter()
    list(itertools.islice(it, 4))
    state = json.loads(json.dumps(it.state_dict()))
    positions = state["pipeline"]["upstream"]["upstream"]["positions"]
    lines = explain_state(state)
    assert any(
        f"each source's next example (read by seeking): 0: {positions[0]}, 1: {positions[1]}, 2: {positions[2]}" in line
        for line in lines
    ), lines


@pytest.mark.parametrize("even", ["drop", "pad"])
def test_even_readers_of_a_finite_seeking_mix(twins, even):
    """Readers passing each other's examples by seeking still end level: dropped to the
    smallest share or padded to the largest, as the reading mix does."""
    fly, cached = twins
    counts = {}
    for name, sources in (("reading", fly), ("seeking", cached)):
        mixed = Dataset.mix(sources, [0.5, 0.3, 0.2], seed=3, block_size=BLOCK, stop="first_exhausted")
        counts[name] = [sum(1 for _ in mixed.shard_by_rank(r, 4, split="examples", even=even)) for r in range(4)]
    assert counts["seeking"] == counts["reading"] and len(set(counts["seeking"])) == 1


def test_dataloader_workers_each_seek_their_share(twins):
    pytest.importorskip("torchdata")
    from torchdata.stateful_dataloader import StatefulDataLoader

    _, cached = twins
    (one,) = readers(cached, 1)
    whole = [key(e) for e in itertools.islice(one, 120)]
    loader = StatefulDataLoader(one.to_torch(), batch_size=None, num_workers=2)
    assert [
        key(e) for e in itertools.islice(loader, 120)
    ] == whole  # workers take turns, each keeping every 2nd example


# ------------------------------------------------------------ a globally shuffled cache as a source


def test_a_globally_shuffled_cache_is_a_mix_source(twins):
    """A mix takes a cache's global shuffle as a source: its examples come in the shuffle's
    own order, epoch after epoch; split by examples over caches the mix seeks it like any
    cache, and gives what the reading mix gives with the other source on the fly."""
    fly, cached = twins
    shuffled = cached[2].global_shuffle(seed=4)
    mixed = Dataset.mix([shuffled, fly[1]], [0.6, 0.4], seed=1, block_size=BLOCK)
    picked = [(int(e["shard"]), int(e["index"])) for e in itertools.islice(mixed, 600) if e["source"] == 0]
    own = [(int(e["shard"]), int(e["index"])) for e in itertools.islice(shuffled.repeat(), len(picked))]
    assert len(picked) > 2 * 128 and picked == own  # past its second epoch of 128 rows
    for parts in (1, 3):
        reading = [
            Dataset.mix([shuffled, fly[1]], [0.6, 0.4], seed=1, block_size=BLOCK).shard_by_rank(
                r, parts, split="examples"
            )
            for r in range(parts)
        ]
        seeking = [
            Dataset.mix([shuffled, cached[1]], [0.6, 0.4], seed=1, block_size=BLOCK).shard_by_rank(
                r, parts, split="examples"
            )
            for r in range(parts)
        ]
        for rank, (a, b) in enumerate(zip(reading, seeking)):
            it = b.iter()
            assert isinstance(it.source, SeekingMix)
            assert [key(e) for e in itertools.islice(it, 200)] == [key(e) for e in itertools.islice(a, 200)], (
                f"reader {rank} of {parts}"
            )


def test_a_spread_global_shuffle_of_two_shards_is_a_mix_source(twins, tmp_path):
    """The spread shuffle cuts its units within shards (the rows left at each shard's end come
    after the whole units): the seeking mix numbers its examples the same way the live source
    reads them."""
    fly, _ = twins
    two_shards = cache_without_beam(on_the_fly()[0], str(tmp_path / "two"), row_group_rows=8)
    rows = [entry.rows for entry in two_shards._pipeline.root.origin.cache.manifest.shards]
    assert len(rows) == 2 and rows[0] % 8, rows  # the first shard ends in a short unit
    shuffled = two_shards.global_shuffle(seed=4, spread=3, unit_rows=8)
    mixed = Dataset.mix([shuffled, fly[1]], [0.6, 0.4], seed=1, block_size=BLOCK)
    picked = [(int(e["shard"]), int(e["index"])) for e in itertools.islice(mixed, 900) if e["source"] == 0]
    own = [(int(e["shard"]), int(e["index"])) for e in itertools.islice(shuffled.repeat(), len(picked))]
    assert len(picked) > 246 and picked == own
    other = cache_without_beam(fly[1], str(tmp_path / "one"), row_group_rows=8)
    for parts in (1, 3):
        reading = [
            Dataset.mix([shuffled, fly[1]], [0.6, 0.4], seed=1, block_size=BLOCK).shard_by_rank(
                r, parts, split="examples"
            )
            for r in range(parts)
        ]
        seeking = [
            Dataset.mix([shuffled, other], [0.6, 0.4], seed=1, block_size=BLOCK).shard_by_rank(
                r, parts, split="examples"
            )
            for r in range(parts)
        ]
        for rank, (a, b) in enumerate(zip(reading, seeking)):
            it = b.iter()
            assert isinstance(it.source, SeekingMix)
            assert [key(e) for e in itertools.islice(it, 300)] == [key(e) for e in itertools.islice(a, 300)], (
                f"reader {rank} of {parts}"
            )


def test_a_mix_with_a_global_shuffle_resumes_and_caps_it(twins):
    fly, cached = twins
    make = lambda: Dataset.mix(  # noqa: E731
        [cached[2].global_shuffle(seed=4), fly[1]], [0.6, 0.4], seed=1, block_size=BLOCK, max_epochs=[1, None]
    ).batch(4)
    report = check_resumption(make, random_steps=5, seed=3, limit=120)
    assert len(report.steps_checked) >= 5
    from_shuffle = [e for b in itertools.islice(make(), 120) for e in b["source"].tolist() if e == 0]
    assert len(from_shuffle) == 128  # capped at one epoch of its 128 rows
    both_capped = Dataset.mix(
        [cached[2].global_shuffle(seed=4), fly[1]], [0.6, 0.4], seed=1, block_size=BLOCK, max_epochs=1
    )
    assert len(list(itertools.islice(both_capped, 1000))) == 128 + 248  # ends when both are spent


@pytest.mark.parametrize(
    "rule", [{"max_epochs": [1, None]}, {}, {"stop": "all_exhausted"}], ids=["capped", "never", "all_exhausted"]
)
def test_an_empty_source_drawn_forever_is_named_in_both_modes(twins, tmp_path, rule):
    """A source with no example that would repeat forever is an error where it is first
    drawn, by the reading and by the seeking mix alike (the one rule decides both)."""
    empty_file = tmp_path / "empty.jsonl"
    empty_file.write_text("")
    empty = Dataset.from_files(str(empty_file)).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(512)
    fly, cached = twins
    empty_cache = cache_without_beam(empty, str(tmp_path / "empty-cache"))
    for sources, mode in (([fly[2], empty], "reading"), ([cached[2], empty_cache], "seeking")):
        ds = Dataset.mix(sources, [0.5, 0.5], seed=3, block_size=BLOCK, **rule).shard_by_rank(0, 1, split="examples")
        it = ds.iter()
        assert isinstance(it.source, SeekingMix) == (mode == "seeking")
        with pytest.raises(InputError, match="mix source 1 yields no examples"):
            list(it)
    with_first = Dataset.mix([cached[2], empty_cache], [0.5, 0.5], seed=3, block_size=BLOCK, stop="first_exhausted")
    assert (
        list(with_first.shard_by_rank(0, 1, split="examples"))
        == list(Dataset.mix([fly[2], empty], [0.5, 0.5], seed=3, block_size=BLOCK, stop="first_exhausted"))
        == []
    )

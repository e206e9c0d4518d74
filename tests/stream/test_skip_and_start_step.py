"""Random access by step: iter_at(N) and skip(n) equal reading and dropping, at every point.

On a cache read in order and on a global shuffle (any number of readers, across epochs) the
iterator seeks without reading; elsewhere it reads through. Either way the state stays exact,
resumes on the same or another world size, records the skipped range, and inspect shows it.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from beamtok import Dataset, StateError
from beamtok.testing import assert_items_equal, tiny_tokenizer

from conftest import inspect_state

TOKENIZER = tiny_tokenizer()  # a stage test: what a token is does not matter
pytest.importorskip("apache_beam")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    from conftest import real_paragraphs, write_jsonl

    root = tmp_path_factory.mktemp("skip")
    paras = real_paragraphs(120)
    paths = [
        str(write_jsonl(root / f"p-{i}.jsonl", [{"text": t} for t in paras[i * 30 : (i + 1) * 30]])) for i in range(4)
    ]
    online = Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(32)
    return online, online.cache(str(root / "cache"), row_group_rows=16)


def rows_of(items) -> list[tuple[int, int]]:
    out = []
    for item in items:
        if isinstance(item, tuple):
            item = item[1]
        shard, index = item["shard"], item["index"]
        if isinstance(shard, int):
            out.append((shard, index))
        else:
            out.extend(zip(shard.tolist(), index.tolist()))
    return out


def streams(cache):
    online, cached = cache
    return {
        "global shuffle, 3 epochs": (lambda: cached.global_shuffle(seed=5).repeat(3).batch(7), True),
        "global shuffle, rank 1 of 3": (
            lambda: cached.global_shuffle(seed=5).repeat(2).shard_by_rank(1, 3).batch(4),
            True,
        ),
        "cache in order, enumerate": (lambda: cached.interleave(1).repeat(2).batch(5).enumerate(), True),
        "cache in order, take": (lambda: cached.interleave(1).batch(3).take(40), True),
        "on the fly": (lambda: online.shuffle_shards(seed=1).interleave(2).batch(4), False),
        "cache behind a shuffle window": (lambda: cached.shuffle(16, seed=2).batch(4), False),
    }


@pytest.mark.parametrize(
    "name",
    [
        "global shuffle, 3 epochs",
        "global shuffle, rank 1 of 3",
        "cache in order, enumerate",
        "cache in order, take",
        "on the fly",
        "cache behind a shuffle window",
    ],
)
def test_skip_equals_reading_and_dropping_at_every_point(cache, name):
    make, seeks = streams(cache)[name]
    full = list(make())
    n = len(full)
    assert n > 20
    for read in (0, 1, 3):
        for skip in sorted({0, 1, 2, 5, n // 3, n - read - 1, n - read, n + 4}):
            it = make().iter()
            head = list(itertools.islice(it, read))
            assert it.seeks is seeks
            passed = it.skip(skip)
            assert passed == max(0, min(skip, n - read))
            state = json.loads(json.dumps(it.state_dict()))
            rest = list(it)
            assert_items_equal(head + rest, full[:read] + full[read + skip :], f"{name}, read {read}, skip {skip}: ")
            assert_items_equal(list(make().iter(state)), rest, f"{name}, resumed after skip {skip}: ")


@pytest.mark.parametrize(
    "name", ["global shuffle, 3 epochs", "global shuffle, rank 1 of 3", "cache in order, enumerate"]
)
def test_a_seek_reads_nothing_and_lands_where_reading_would(cache, name):
    make, _ = streams(cache)[name]
    n = len(list(make()))
    for step in (0, 9, n // 2, n - 1):
        sought = make().iter_at(step)
        assert sought.stats()["examples"] == 0  # nothing handed out by the source: nothing read
        assert sought.step == step
        read = make().iter()
        list(itertools.islice(read, step))
        a, b = sought.state_dict()["pipeline"], read.state_dict()["pipeline"]
        assert_items_equal([next(make().iter(sought.state_dict()))], [next(read)], f"step {step}: ")
        if name.startswith("global"):  # the very same position, the counts aside
            strip = lambda s: {k: (strip(v) if isinstance(v, dict) else v) for k, v in s.items() if k != "stats"}  # noqa: E731
            assert strip(a) == strip(b)


def test_world_size_change_after_a_skip_loses_and_repeats_nothing(cache):
    _, cached = cache
    make = lambda rank, world: cached.global_shuffle(seed=8).shard_by_rank(rank, world).batch(3)  # noqa: E731
    full = Counter(rows_of(cached.global_shuffle(seed=8)))
    consumed, passed_over, states = Counter(), Counter(), []
    for rank in range(2):
        it = make(rank, 2).iter()
        consumed.update(rows_of(itertools.islice(it, 4 + rank)))
        probe = make(rank, 2).iter(it.state_dict())
        passed_over.update(rows_of(itertools.islice(probe, 6)))  # what the skip passes over
        assert it.skip(6) == 6
        consumed.update(rows_of(itertools.islice(it, 2)))
        states.append(json.loads(json.dumps(it.state_dict())))
    after = Counter()
    for rank in range(3):
        after.update(rows_of(make(rank, 3).iter_merged(states)))
    assert not (consumed & after) and not (passed_over & after)
    assert consumed + passed_over + after == full


def test_inspect_shows_the_skipped_range_and_a_forged_one_is_refused(cache, tmp_path):
    _, cached = cache
    it = cached.global_shuffle(seed=1).batch(4).iter()
    list(itertools.islice(it, 3))
    it.skip(10)
    next(it)
    state = it.state_dict()
    assert state["skipped"] == [[3, 10]] and it.step == 14 and it.stats()["delivered"]["items"] == 4
    assert "skipped with skip(): items 3-12 (10 in all" in inspect_state(state, tmp_path)
    resumed = cached.global_shuffle(seed=1).batch(4).iter(state)
    assert resumed.step == 14 and resumed.state_dict()["skipped"] == [[3, 10]]
    forged = {**state, "skipped": [[3]]}
    with pytest.raises(StateError, match="skipped"):
        cached.global_shuffle(seed=1).batch(4).iter(forged)


def test_step_and_state_are_exclusive(cache):
    from beamtok import ConfigError

    _, cached = cache
    with pytest.raises(ConfigError, match="one of"):
        cached.iter(cached.iter().state_dict(), step=3)

"""Mixing while training: set_weights at block boundaries (kept in the state, replayed on
resume, on any world size, across modes), repetition caps, and mixes of mixes."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from beamtok import ConfigError, Dataset, StateError
from beamtok._src.stream.mixing.mix_plan import block_counts
from beamtok.testing import assert_items_equal, check_resumption, tiny_tokenizer

from conftest import CORPUS, inspect_state

TOKENIZER = tiny_tokenizer()  # a stage test: what a token is does not matter
BLOCK = 40


def source(pattern: str) -> Dataset:
    return Dataset.from_files(str(CORPUS / pattern)).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(32)


@pytest.fixture(scope="module")
def sources() -> list[Dataset]:
    return [source("shakespeare-{00..01}.jsonl"), source("pydocs-{00..01}.jsonl.zst")]


def mixed(sources, batch=4, **options):
    return Dataset.mix(sources, [1, 1], block_size=BLOCK, **options).batch(batch)


def picks(batches) -> list[int]:
    return [int(s) for b in batches for s in b["source"]]


def run_with_change(make, at_step: int, weights, steps: int, state_at: int | None = None):
    """Read ``steps`` batches, setting ``weights`` after ``at_step``; also the state after
    ``state_at`` batches (None: none)."""
    it = make().iter()
    out, state = [], None
    for step in range(steps):
        if step == at_step:
            it.set_weights(weights)
        if step == state_at:
            state = json.loads(json.dumps(it.state_dict()))
        out.append(next(it))
    return out, state


def test_new_weights_start_at_the_next_block_boundary(sources):
    batches, _ = run_with_change(lambda: mixed(sources), 5, [1, 3], 60)
    chosen = picks(batches)
    start = -(-5 * 4 // BLOCK) * BLOCK  # 20 examples taken: the boundary is example 40
    assert start == 40
    before = [chosen[b : b + BLOCK] for b in range(0, start, BLOCK)]
    after = [chosen[b : b + BLOCK] for b in range(start, len(chosen) - BLOCK + 1, BLOCK)]
    assert all(Counter(block) == dict(enumerate(block_counts([1, 1], BLOCK))) for block in before)
    assert len(after) >= 3 and all(Counter(block) == dict(enumerate(block_counts([1, 3], BLOCK))) for block in after)


def test_a_change_right_at_a_boundary_takes_the_block_it_opens(sources):
    batches, _ = run_with_change(lambda: mixed(sources), 10, [3, 1], 30)  # 40 taken: block 1 untouched
    chosen = picks(batches)
    assert Counter(chosen[40:80]) == dict(enumerate(block_counts([3, 1], BLOCK)))


def test_resume_replays_the_change_at_every_point(sources):
    full, _ = run_with_change(lambda: mixed(sources), 7, [1, 4], 45)
    for k in (0, 3, 7, 8, 20, 44):
        it = mixed(sources).iter()
        for step in range(k):
            if step == 7:
                it.set_weights([1, 4])
            next(it)
        state = json.loads(json.dumps(it.state_dict()))
        resumed = mixed(sources).iter(state)
        rest = []
        for step in range(k, 45):
            if step == 7:  # a resume before the change: the loop makes it again
                resumed.set_weights([1, 4])
            rest.append(next(resumed))
        assert_items_equal(rest, full[k:], f"resumed at {k}: ")
    assert mixed(sources).iter().stats()["weights"] == [1.0, 1.0]


def test_states_cross_modes_with_the_change(sources, tmp_path):
    pytest.importorskip("apache_beam")
    cached = [sources[0], sources[1].cache(str(tmp_path / "pydocs"))]
    full, _ = run_with_change(lambda: mixed(sources), 4, [2, 1], 30)
    it = mixed(sources).iter()
    for step in range(12):
        if step == 4:
            it.set_weights([2, 1])
        next(it)
    crossed = list(itertools.islice(mixed(cached).iter(json.loads(json.dumps(it.state_dict()))), 18))
    assert_items_equal(crossed, full[12:])


def rows(batches) -> list[tuple[int, int, int]]:
    return [(int(s), int(sh), int(i)) for b in batches for s, sh, i in zip(b["source"], b["shard"], b["index"])]


@pytest.mark.parametrize("split", ["shards", "examples"])
def test_world_size_change_keeps_the_change_and_loses_nothing(sources, split):
    new_world = 3 if split == "examples" else 1
    make = lambda rank, world: (  # noqa: E731
        Dataset.mix(sources, [1, 1], block_size=BLOCK).shard_by_rank(rank, world, split=split).batch(2)
    )
    states, seen = [], Counter()
    for rank in range(2):
        it = make(rank, 2).iter()
        for step in range(9):
            if step == 6:
                assert it.set_weights([1, 5]) == 40  # 24 positions taken by the two readers: the boundary is 40
            seen.update(rows([next(it)]))
        states.append(json.loads(json.dumps(it.state_dict())))
    changes = [s["pipeline"]["upstream"] for s in states]
    changes = [c.get("weight_changes", c.get("upstream", {}).get("weight_changes")) for c in changes]
    assert changes == [[[40, [1.0, 5.0]]]] * 2
    news = [make(rank, new_world).iter_merged(states) for rank in range(new_world)]
    after = Counter(r for it in news for r in rows(itertools.islice(it, 40)))
    assert not (seen & after)
    for it in news:
        assert it.stats()["weights"] == [1.0, 5.0]
    chosen = Counter(r[0] for r in after)
    assert chosen[1] > 3 * chosen[0]  # the new weights rule after the resume
    if split == "shards":  # readers told different weights cannot be merged
        states[1]["pipeline"]["upstream"]["weight_changes"] = [[40, [1.0, 6.0]]]
        with pytest.raises(StateError, match="disagree on the weights"):
            next(make(0, new_world).iter_merged(states))


def test_readers_splitting_examples_agree_on_the_boundary_when_one_has_passed_it(sources):
    """Three readers taking turns: after 14 steps reader 1 has taken example 40 while reader 0's
    next is 40; the block from 40 is under way, so every reader must start the change at 80."""
    starts = []
    for rank in range(3):
        it = Dataset.mix(sources, [1, 1], block_size=BLOCK).shard_by_rank(rank, 3, split="examples").iter()
        list(itertools.islice(it, 14))
        starts.append(it.set_weights([1, 2]))
    assert starts == [80, 80, 80]


def test_inspect_shows_the_change_and_bad_weights_are_refused(sources, tmp_path):
    it = mixed(sources).iter()
    next(it)
    it.set_weights([1, 2])
    assert "weights set while training: [1.0, 2.0] from global example 40" in inspect_state(it.state_dict(), tmp_path)
    with pytest.raises(ConfigError, match="set_weights"):
        it.set_weights([1, 2, 3])
    with pytest.raises(ConfigError, match="set_weights"):
        it.set_weights([0, 0])
    with pytest.raises(ConfigError, match="block_size"):
        it.set_weights([1, 1000])
    with pytest.raises(ConfigError, match="applies to a mix"):
        sources[0].iter().set_weights([1])


def test_a_repetition_cap_spends_a_source_and_the_others_fill_in(sources):
    small = (
        Dataset.from_sequence(["one two three four five six seven eight nine ten " * 3] * 4)
        .tokenize(TOKENIZER)
        .concat_chunk(16)
    )
    big = Dataset.from_files(str(CORPUS / "pydocs-00.jsonl.zst")).tokenize(TOKENIZER).concat_chunk(16)
    rows_small = len(list(small))
    make = lambda: Dataset.mix([small, big], [1, 1], max_epochs=[2, 1], block_size=BLOCK)  # noqa: E731
    it = make().iter()
    out = list(it)
    stats = it.stats()
    assert [s["examples"] for s in stats["sources"]] == [
        2 * rows_small,
        len(list(big)),
    ]  # each read its cap, then the mix ended
    assert stats["spent"] == [True, True]
    uncapped = [ex["source"] for ex in itertools.islice(Dataset.mix([small, big], [1, 1], block_size=BLOCK), 400)]
    spent_at = [i for i, s in enumerate(uncapped) if s == 0][2 * rows_small - 1]
    want = uncapped[: spent_at + 1] + [
        s for s in uncapped[spent_at + 1 :] if s == 1
    ]  # the spent source's positions passed over
    assert [ex["source"] for ex in out[: len(want)]] == want
    check_resumption(lambda: make().batch(8), random_steps=12)
    forever = Dataset.mix([small, big], [1, 1], max_epochs=[2, None], block_size=BLOCK)
    taken = list(itertools.islice(forever, 2000))
    assert sum(1 for ex in taken if ex["source"] == 0) == 2 * rows_small  # capped; the uncapped source goes on
    with pytest.raises(ConfigError, match="stop='never'"):
        Dataset.mix([small, big], [1, 1], max_epochs=1, stop="first_exhausted")


def test_a_mix_of_mixes_is_the_mix_of_its_sources_by_share(sources):
    third = source("milton/allegro.txt")
    inner = Dataset.mix(sources, [1, 3])
    nested = Dataset.mix([inner, third], [2, 2], block_size=BLOCK)
    plan = nested.pipeline.root.plan
    assert plan.schedule == ((0, (0.5, 1.5, 2.0)),)
    chosen = [ex["source"] for ex in itertools.islice(nested, 4 * BLOCK)]
    for b in range(0, 4 * BLOCK, BLOCK):
        assert Counter(chosen[b : b + BLOCK]) == dict(enumerate(block_counts([0.5, 1.5, 2.0], BLOCK)))
    scheduled = Dataset.mix([Dataset.mix(sources, [(0, [1, 1]), (4096, [1, 2])]), third])
    assert (
        len(scheduled.pipeline.root.mixed) == 2
    )  # a schedule does not flatten: nested (tests/stream/mixing/test_mix_nested.py)

"""Resume on another world size: the new readers, from the list of every old reader's state,
yield exactly what the old readers had not yet yielded (by (shard, index) provenance): none
lost, none repeated, mid-shard, mid-epoch, across epochs, with interleave, shard shuffling,
example splits, mixes and batches; same world size is the plain resume; refusals name why."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter

import pytest

from beamtok import Dataset, StateError

Row = tuple[int, int]


def rows(items) -> list[Row]:
    out = []
    for item in items:
        if isinstance(item["shard"], int):
            out.append((item["shard"], item["index"]))
        else:  # a batch
            out.extend(zip(item["shard"].tolist(), item["index"].tolist()))
    return out


def run_old(make, world: int, rng: random.Random, steps: int) -> tuple[list, Counter]:
    """Each old rank reads about ``steps`` items (+-2, as ranks of one job drift a little)."""
    states, consumed = [], Counter()
    for rank in range(world):
        it = make().shard_by_rank(rank, world, **split_of(make)).iter()
        consumed.update(rows(itertools.islice(it, max(0, steps + rng.randint(-2, 2)))))
        states.append(json.loads(json.dumps(it.state_dict())))
    return states, consumed


def split_of(make) -> dict:
    return {"split": getattr(make, "split", "shards")}


def check_elastic(make, old_world: int, new_world: int, steps: int, seed: int = 0) -> None:
    full = Counter()
    for rank in range(old_world):
        full.update(rows(make().shard_by_rank(rank, old_world, **split_of(make))))
    rng = random.Random(seed)
    states, consumed = run_old(make, old_world, rng, steps)
    rng.shuffle(states)  # any order
    after = Counter()
    for rank in range(new_world):
        after.update(rows(make().shard_by_rank(rank, new_world, **split_of(make)).iter_merged(states)))
    repeated = (consumed & after) if not any(v > 1 for v in full.values()) else Counter()
    assert not repeated, f"{old_world}->{new_world}: repeated {sorted(repeated)[:5]}"
    assert consumed + after == full, (
        f"{old_world}->{new_world} after {steps}: lost {sorted((full - consumed - after).elements())[:5]}, "
        f"extra {sorted((consumed + after - full).elements())[:5]}"
    )


@pytest.fixture
def shards(make_shards):
    return make_shards(7, docs_per_shard=6)


def packed(paths, tokenizer_dir):
    return Dataset.from_files(paths).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(40)


@pytest.mark.parametrize(("old_world", "new_world"), [(2, 1), (1, 3), (3, 2), (2, 4), (4, 3)])
def test_shard_split_loses_and_repeats_nothing(shards, tokenizer_dir, old_world, new_world):
    for steps in (0, 3, 17, 40, 1000):
        check_elastic(lambda: packed(shards, tokenizer_dir), old_world, new_world, steps, seed=steps)


def test_interleave_shard_shuffle_and_epochs(shards, tokenizer_dir):
    def make():
        return packed(shards, tokenizer_dir).shuffle_shards(seed=5).interleave(2).repeat(3)

    for old_world, new_world, steps in ((2, 3, 25), (3, 1, 60), (1, 2, 95), (3, 2, 130)):
        check_elastic(make, old_world, new_world, steps, seed=steps)


def test_world_size_changes_twice(shards, tokenizer_dir):
    def make():
        return packed(shards, tokenizer_dir).interleave(2).repeat(2)

    full = Counter(rows(make()))
    states, consumed = run_old(make, 3, random.Random(1), 21)
    middle = []
    for rank in range(2):  # 3 -> 2, read a little, then 2 -> 4
        it = make().shard_by_rank(rank, 2).iter_merged(states)
        consumed.update(rows(itertools.islice(it, 9 + rank)))
        middle.append(it.state_dict())
    for rank in range(4):
        consumed.update(rows(make().shard_by_rank(rank, 4).iter_merged(middle)))
    assert consumed == full


def test_batches_and_example_split(shards, tokenizer_dir):
    def batched():
        return packed(shards, tokenizer_dir).batch(3)

    check_elastic(batched, 2, 3, 6)

    def by_examples():
        return packed(shards, tokenizer_dir).repeat(2)

    by_examples.split = "examples"  # type: ignore[attr-defined]
    for old_world, new_world, steps in ((2, 3, 11), (3, 2, 30), (4, 1, 50), (1, 4, 7)):
        check_elastic(by_examples, old_world, new_world, steps, seed=steps)


def test_same_world_size_is_the_plain_resume(shards, tokenizer_dir):
    def make():
        return packed(shards, tokenizer_dir).shuffle(window=8, seed=1).batch(2)

    states = []
    for rank in range(2):
        it = make().shard_by_rank(rank, 2).iter()
        next(it), next(it)
        states.append(it.state_dict())
    for rank in range(2):
        plain = rows(make().shard_by_rank(rank, 2).iter(states[rank]))
        assert rows(make().shard_by_rank(rank, 2).iter_merged(states[::-1])) == plain


def test_mix_sources_each_lose_and_repeat_nothing(make_shards, tokenizer_dir):
    a = make_shards(5, docs_per_shard=5)
    b = make_shards(4, docs_per_shard=5, start=40)

    def make():
        return Dataset.mix([packed(a, tokenizer_dir), packed(b, tokenizer_dir)], [0.6, 0.4], seed=3, block_size=10)

    sizes = [Counter(rows(packed(a, tokenizer_dir))), Counter(rows(packed(b, tokenizer_dir)))]
    seen = [Counter(), Counter()]  # per source: (shard, index) of every example of epochs 0 and 1
    states = []
    for rank in range(2):
        it = make().shard_by_rank(rank, 2).iter()
        for item in itertools.islice(it, 23 + 4 * rank):
            seen[item["source"]][(item["shard"], item["index"])] += 1
        states.append(it.state_dict())
    last = [max(s["pipeline"]["sources"][j]["epoch"] for s in states) for j in range(2)]
    for rank in range(3):
        it = make().shard_by_rank(rank, 3).iter_merged(states)
        while True:  # until every source of this reader is past epoch last + 1
            item = next(it)
            j = item["source"]
            epochs = [source["epoch"] for source in it.stats()["sources"]]
            if epochs[j] <= last[j] + 1:
                seen[j][(item["shard"], item["index"])] += 1
            if all(epochs[k] > last[k] + 1 for k in range(2)):
                break
    for j in range(2):
        assert seen[j] == Counter({row: last[j] + 2 for row in sizes[j]}), f"source {j}"


def test_stats_add_up_on_reader_zero(shards, tokenizer_dir):
    states, _ = run_old(lambda: packed(shards, tokenizer_dir), 3, random.Random(0), 10)
    old_docs = sum(s["pipeline"]["stats"]["examples"] for s in states)
    resumed = [packed(shards, tokenizer_dir).shard_by_rank(r, 2).iter_merged(states) for r in range(2)]
    assert [it.stats()["examples"] for it in resumed] == [old_docs, 0]


@pytest.mark.parametrize("split", ["shards", "examples"])
def test_inside_shuffle_windows(shards, tokenizer_dir, split):
    # old readers part way through their windows: new readers finish those windows first
    def make():
        return packed(shards, tokenizer_dir).interleave(2).repeat(2).shuffle(window=8, seed=1).batch(2)

    make.split = split  # type: ignore[attr-defined]
    for old_world, new_world, steps in ((2, 3, 5), (3, 2, 13), (1, 4, 21), (4, 1, 2), (2, 5, 30)):
        check_elastic(make, old_world, new_world, steps, seed=steps)


def test_shuffle_windows_through_two_changes_and_workers(shards, tokenizer_dir):
    def make():
        return packed(shards, tokenizer_dir).parallel(2).interleave(2).shuffle(window=16, seed=2)

    full = Counter(rows(make()))
    states, consumed = run_old(make, 3, random.Random(2), 7)
    middle = []
    for rank in range(2):  # 3 -> 2 while windows drain, then 2 -> 4
        it = make().shard_by_rank(rank, 2).iter_merged(states)
        consumed.update(rows(itertools.islice(it, 3 + rank)))
        middle.append(it.state_dict())
    assert any("drain" in json.dumps(s) for s in middle)
    for rank in range(4):
        consumed.update(rows(make().shard_by_rank(rank, 4).iter_merged(middle)))
    assert consumed == full


def test_refusals_name_the_problem(shards, tokenizer_dir):
    states, _ = run_old(lambda: packed(shards, tokenizer_dir).take(30), 2, random.Random(0), 5)
    with pytest.raises(StateError, match=r"through take\(\)"):
        packed(shards, tokenizer_dir).take(30).shard_by_rank(0, 3).iter_merged(states)
    states, _ = run_old(lambda: packed(shards, tokenizer_dir), 3, random.Random(0), 5)
    with pytest.raises(StateError, match=r"all 3 old readers .*missing readers \[1\]"):
        packed(shards, tokenizer_dir).shard_by_rank(0, 2).iter_merged([states[0], states[2]])
    with pytest.raises(StateError, match=r"readers \[2\] given twice"):
        packed(shards, tokenizer_dir).shard_by_rank(0, 2).iter_merged([states[0], states[1], states[2], states[2]])
    with pytest.raises(StateError, match=r"changed since the state was saved: packing: seq_len 40 → 41"):
        Dataset.from_files(shards).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(41).shard_by_rank(
            0, 2
        ).iter_merged(states)
    with pytest.raises(StateError, match=r"rank split: \"shards\" → \"examples\""):
        packed(shards, tokenizer_dir).shard_by_rank(0, 2, split="examples").iter_merged(states)


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    pytest.importorskip("apache_beam")
    from conftest import CORPUS, ROOT

    files = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]
    ds = (
        Dataset.from_files(files)
        .tokenize(str(ROOT / "data" / "tokenizers" / "gpt2"))
        .ensure_bos_eos()
        .concat_chunk(256)
    )
    return ds.cache(str(tmp_path_factory.mktemp("elastic") / "cache"), row_group_rows=16)


def test_global_shuffle_resumes_on_any_world_size_in_one_global_order(cached):
    def make():
        return cached.global_shuffle(seed=4).repeat(2)

    for old_world, new_world, steps in ((2, 3, 40), (3, 2, 300), (4, 1, 1), (1, 4, 333), (3, 5, 1000)):
        check_elastic(make, old_world, new_world, steps, seed=steps)
    # old ranks in lockstep: the new ranks continue the one global order where the old left it
    order = rows(make())
    old = [make().shard_by_rank(r, 2).iter() for r in range(2)]
    for it in old:
        list(itertools.islice(it, 50))
    states = [it.state_dict() for it in old]
    new = [iter(rows(make().shard_by_rank(r, 3).iter_merged(states))) for r in range(3)]
    total = len(order) // 2
    merged = [next(new[(linear % total) % 3]) for linear in range(100, 2 * total)]  # position p is reader p % 3's
    assert merged == order[100:] and all(next(it, None) is None for it in new)
    assert all("taken" not in s["pipeline"] for s in states)


def test_delivered_counts_add_up_over_a_world_size_change(shards, tokenizer_dir):
    states, consumed = run_old(lambda: packed(shards, tokenizer_dir), 2, random.Random(1), 5)
    before = sum(state["delivered"]["examples"] for state in states)
    assert before == sum(consumed.values())
    resumed = [packed(shards, tokenizer_dir).shard_by_rank(rank, 3).iter_merged(states) for rank in range(3)]
    assert [it.stats()["delivered"]["examples"] for it in resumed] == [before, 0, 0]
    for it in resumed:
        list(it)
    total = sum(it.stats()["delivered"]["examples"] for it in resumed)
    assert total == sum(1 for rank in range(2) for _ in packed(shards, tokenizer_dir).shard_by_rank(rank, 2))

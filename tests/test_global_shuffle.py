"""Global shuffle over a cache: every row once per epoch in a keyed permutation (computed, not
stored), reshuffled each epoch, windowed or not; readers split positions, so any number of
readers share one global order; exact resume; permutation quality."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from beamtok import ConfigError, Dataset
from beamtok.stream.global_shuffle import GlobalOrder
from beamtok.stream.permutation import FeistelPermutation
from beamtok.testing import assert_items_equal, check_resumption

from conftest import CORPUS, ROOT

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


def rows_of(ds) -> list[tuple[int, int]]:
    return [(int(ex["shard"]), int(ex["index"])) for ex in ds]


@pytest.fixture(scope="module")
def cached(tmp_path_factory) -> Dataset:
    pytest.importorskip("apache_beam")
    files = [
        str(CORPUS / "shakespeare-00.jsonl"),
        str(CORPUS / "shakespeare-01.jsonl"),
        str(CORPUS / "pydocs-00.jsonl.zst"),
    ]
    ds = Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(128)
    return ds.cache(str(tmp_path_factory.mktemp("gs") / "cache"), row_group_rows=8)


@pytest.fixture(scope="module")
def in_order(cached) -> list[tuple[int, int]]:
    return rows_of(cached)


@pytest.mark.parametrize("window", [None, 40])
def test_every_row_once_per_epoch_reshuffled_each_epoch(cached, in_order, window):
    out = rows_of(cached.global_shuffle(seed=3, window=window).repeat(3))
    n = len(in_order)
    epochs = [out[e * n : (e + 1) * n] for e in range(3)]
    assert len(out) == 3 * n and all(sorted(e) == sorted(in_order) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3 and epochs[0] != in_order
    assert rows_of(cached.global_shuffle(seed=4, window=window)) != epochs[0]


def test_windows_keep_reads_local(cached, in_order):
    position = {row: i for i, row in enumerate(in_order)}
    out = [position[r] for r in rows_of(cached.global_shuffle(seed=1, window=40))]
    windows = [p // 40 for p in out]
    runs = 1 + sum(a != b for a, b in itertools.pairwise(windows))
    # the output is one run of rows per window of 40 consecutive rows: each window read whole, once
    assert runs == len(set(windows)) == -(-len(in_order) // 40)
    assert windows != sorted(windows)
    inner = [tuple(p % 40 for p in out[k : k + 40]) for k in range(0, len(out), 40)]
    full = [pattern for pattern in inner if sorted(pattern) == list(range(40))]
    assert len(full) > 20 and len(set(full)) == len(full)  # each window has its own inner order


def test_resume_is_exact_across_epochs(cached):
    make = lambda: cached.global_shuffle(seed=2, window=None).repeat(2).batch(5)  # noqa: E731
    report = check_resumption(make, random_steps=10, seed=1)
    assert report.max_state_bytes < 1500  # positions, counters, delivered counts and the pipeline parts


def test_readers_share_one_global_order_for_any_count(cached):
    full = rows_of(cached.global_shuffle(seed=5))
    for world in (1, 2, 3):
        ranks = [rows_of(cached.global_shuffle(seed=5).shard_by_rank(r, world)) for r in range(world)]
        merged = [row for group in itertools.zip_longest(*ranks) for row in group if row is not None]
        assert merged == full, f"world size {world}"


def test_state_is_epoch_and_position(cached):
    it = cached.global_shuffle(seed=0).iter()
    for _ in range(37):
        next(it)
    state = it.state_dict()["pipeline"]
    assert (state["epoch"], state["position"]) == (0, 37) and len(json.dumps(state)) < 400
    resumed = cached.global_shuffle(seed=0).iter(state_dict=it.state_dict())
    assert_items_equal([next(resumed)], [next(it)])


def decoded_groups(ds: Dataset, budget_groups: int) -> tuple[int, int]:
    """(rows read, row groups decoded) with a decode cache of about ``budget_groups`` groups."""
    it = ds.iter()
    access = it.source.source.opened()
    access.pool.max_bytes = budget_groups * 8 * (128 * 4 + 400)  # row groups of 8 rows of 128 int32 tokens
    rows = len(list(it))
    return rows, access.groups_decoded


def test_row_groups_are_decoded_once_per_window(cached):
    rows, windowed = decoded_groups(cached.global_shuffle(seed=1, window=32, local_copy=False), budget_groups=6)
    groups = rows // 8
    assert windowed <= groups + 2 * (rows // 32 + 1)  # each group about once, plus window edges
    _, whole = decoded_groups(cached.global_shuffle(seed=1, local_copy=False), budget_groups=6)
    assert whole > 5 * groups  # without windows, a small decode cache misses on most rows
    _, roomy = decoded_groups(cached.global_shuffle(seed=1, local_copy=False), budget_groups=10_000)
    assert roomy == len({(int(ex["shard"]), int(ex["index"]) // 8) for ex in cached})  # all fits: each group once


def test_refused_where_rows_cannot_be_reached(cached):
    with pytest.raises(ConfigError, match="needs random access"):
        Dataset.from_sequence(["a"]).tokenize(TOKENIZER).concat_chunk(4).global_shuffle()
    with pytest.raises(ConfigError, match="replaces shuffle_shards"):
        cached.shuffle_shards(1).global_shuffle()
    with pytest.raises(ConfigError, match="replaces shuffle_shards"):
        cached.global_shuffle().interleave(2)


def test_permutation_is_a_bijection_for_every_size():
    for n in (1, 2, 3, 5, 64, 1000, 4097):
        assert sorted(FeistelPermutation(n, (7,))(np.arange(n)).tolist()) == list(range(n))
    order = GlobalOrder(1001, seed=0, epoch=0, window=100)
    assert sorted(order.rows_at(np.arange(1001)).tolist()) == list(range(1001))


def test_permutation_quality():
    n = 20000
    perm = FeistelPermutation(n, (0, 0))(np.arange(n))
    assert np.mean(np.abs(np.diff(perm)) == 1) < 0.001  # sorted input does not stay in runs
    assert abs(np.corrcoef(np.arange(n), perm)[0, 1]) < 0.03  # no drift of position with row
    other_epoch = FeistelPermutation(n, (0, 1))(np.arange(n))
    assert np.mean(perm == other_epoch) < 0.001
    counts = np.zeros((8, 8))
    for seed in range(400):
        for position, row in enumerate(FeistelPermutation(8, (seed, 0))(np.arange(8))):
            counts[row, position] += 1
    expected = counts.sum() / counts.size
    assert counts.min() > 0 and ((counts - expected) ** 2 / expected).sum() < 110  # 49 dof


def test_windowed_order_changes_inside_every_window_from_epoch_to_epoch():
    """Each epoch orders the windows anew and, inside each window, the rows anew: an inner
    order keyed without the epoch would replay every window's order every epoch."""
    total, window = 1000, 50

    def inner_orders(epoch: int) -> dict[int, list[int]]:
        rows = GlobalOrder(total, seed=7, epoch=epoch, window=window).rows_at(np.arange(total))
        orders: dict[int, list[int]] = {}
        for row in rows.tolist():
            orders.setdefault(row // window, []).append(row)
        return orders

    first, second = inner_orders(0), inner_orders(1)
    assert sorted(first) == sorted(second) == list(range(total // window))
    assert all(sorted(first[w]) == sorted(second[w]) for w in first)  # each window holds the same rows
    assert sum(first[w] != second[w] for w in first) == len(first)  # in another order, in every window
    windows_in_order = [GlobalOrder(total, seed=7, epoch=e, window=window).rows_at(np.arange(0, total, window)) // window for e in (0, 1)]
    assert windows_in_order[0].tolist() != windows_in_order[1].tolist()


@pytest.mark.parametrize(("spread", "unit"), [(4, 8), (3, 5)])
def test_spread_takes_whole_units_one_after_another(cached, in_order, spread, unit):
    """A spread window is ``spread`` units of ``unit`` consecutive rows drawn anywhere in the
    cache; its rows come one unit after another, so neighbours never share a unit; every row
    once an epoch, a new order each epoch."""
    out = rows_of(cached.global_shuffle(seed=3, spread=spread, unit_rows=unit).repeat(2))
    n = len(in_order)
    epochs = [out[:n], out[n:]]
    assert all(sorted(e) == sorted(in_order) for e in epochs) and epochs[0] != epochs[1]
    position = {row: i for i, row in enumerate(in_order)}
    units = [position[r] // unit for r in epochs[0]]
    whole = n // unit
    for start in range(0, whole * unit, spread * unit):
        window = units[start : min(start + spread * unit, whole * unit)]
        held = min(spread, whole - start // unit)
        assert sorted(set(window)) == sorted(set(window[:held])) and len(set(window)) == held  # whole units, each in one slot
        assert all(window[i] == window[i % held] for i in range(len(window)))  # slot o mod K: one unit after another
    assert sorted(units[whole * unit :]) == [whole] * (n - whole * unit)  # the rows past the last whole unit come last
    first_window = [{position[r] // unit for r in e[: spread * unit]} for e in epochs]
    assert first_window[0] != first_window[1]  # the units are drawn anew each epoch
    inside = [[position[r] for r in epochs[0] if position[r] // unit == u] for u in range(whole)]
    assert sum(rows != sorted(rows) for rows in inside) > 0.8 * whole  # a unit's rows are permuted too


def test_spread_readers_share_the_order_and_read_only_their_units(cached, in_order):
    spread, unit, readers = 6, 8, 3
    shuffled = cached.global_shuffle(seed=5, spread=spread, unit_rows=unit)
    one = rows_of(shuffled)
    parts = [shuffled.shard_by_rank(r, readers, split="examples").iter() for r in range(readers)]
    taken = [rows_of(it) for it in parts]
    assert [row for trio in itertools.zip_longest(*taken) for row in trio if row is not None] == one
    position = {row: i for i, row in enumerate(in_order)}
    full_windows = len(in_order) // unit // spread * spread * unit  # output positions in windows of all 6 units
    owned = [{position[row] // unit for j, row in enumerate(rows) if r + j * readers < full_windows} for r, rows in enumerate(taken)]
    assert all(len(units) > 5 for units in owned) and all(not a & b for a, b in itertools.combinations(owned, 2))  # a unit is one reader's
    decoded = [it.source.source.opened().groups_decoded for it in parts]
    groups = sum(-(-e.rows // 8) for e in cached._pipeline.root.origin.cache.manifest.shards)
    assert max(decoded) < 0.6 * groups, (decoded, groups)  # about a third each (units straddle groups at shard ends)


def test_spread_resumes_exactly_and_refuses_a_window_beside_it(cached):
    check_resumption(lambda: cached.global_shuffle(seed=2, spread=4, unit_rows=8).repeat(2).batch(5), random_steps=6, seed=1)
    with pytest.raises(ConfigError, match="window= and spread="):
        cached.global_shuffle(window=8, spread=4)
    with pytest.raises(ConfigError, match="unit_rows= sizes the units of spread="):
        cached.global_shuffle(unit_rows=8)


def test_spread_changes_world_size_losing_and_repeating_nothing(cached, in_order):
    shuffled = cached.global_shuffle(seed=6, spread=6, unit_rows=8)
    old = [shuffled.shard_by_rank(r, 3, split="examples").iter() for r in range(3)]
    seen = [row for k in range(3 * 40 + 2) for row in rows_of([next(old[0 if k >= 120 else k % 3])])]
    states = [json.loads(json.dumps(it.state_dict())) for it in old]
    for r in range(2):
        seen += rows_of(shuffled.shard_by_rank(r, 2, split="examples").iter(state_dict=states))
    assert sorted(seen) == sorted(in_order)

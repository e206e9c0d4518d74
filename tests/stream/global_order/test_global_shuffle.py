"""Global shuffle over a cache: every row once per epoch in a keyed permutation (computed, not
stored), reshuffled each epoch, windowed or not; readers split positions, so any number of
readers share one global order; exact resume; permutation quality."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok import ConfigError, Dataset
from beamtok._src.stream.global_order.order import GlobalOrder
from beamtok._src.stream.global_order.permutation import FeistelPermutation
from beamtok._src.stream.global_order.shard_units import ShardUnits
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
    resumed = cached.global_shuffle(seed=0).iter(it.state_dict())
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
    windows_in_order = [
        GlobalOrder(total, seed=7, epoch=e, window=window).rows_at(np.arange(0, total, window)) // window
        for e in (0, 1)
    ]
    assert windows_in_order[0].tolist() != windows_in_order[1].tolist()


def shard_rows_of(in_order: list[tuple[int, int]]) -> list[int]:
    return [sum(1 for shard, _ in in_order if shard == s) for s in range(1 + max(shard for shard, _ in in_order))]


@pytest.mark.parametrize(("spread", "unit"), [(4, 8), (3, 5)])
def test_spread_takes_whole_units_of_one_shard_one_after_another(cached, in_order, spread, unit):
    """A spread window is ``spread`` units of ``unit`` consecutive rows of one shard drawn
    anywhere in the cache; its rows come one unit after another, so neighbours never share a
    unit; a short unit's missing rows are passed over; every row once an epoch, a new order
    each epoch."""
    out = rows_of(cached.global_shuffle(seed=3, spread=spread, unit_rows=unit).repeat(2))
    n = len(in_order)
    shard_rows = shard_rows_of(in_order)
    assert len(shard_rows) == 3 and any(
        rows % unit for rows in shard_rows[:2]
    )  # a short unit inside the cache, not only at its end
    epochs = [out[:n], out[n:]]
    assert all(sorted(e) == sorted(in_order) for e in epochs) and epochs[0] != epochs[1]
    order = GlobalOrder(n, 3, 0, None, spread, ShardUnits(shard_rows, unit))
    at = order.rows_at(np.arange(order.positions))
    assert [in_order[r] for r in at if r >= 0] == epochs[0]  # the source reads the order, holes passed over
    assert (at < 0).sum() == order.positions - n
    units_of = {}  # (window, slot) -> the rows read there
    for p, r in enumerate(at.tolist()):
        window, offset = divmod(p, spread * unit)
        held = min(spread, order.units.units - window * spread)
        if r >= 0:
            units_of.setdefault((window, offset % held), []).append(in_order[r])
    keys = [{(shard, index // unit) for shard, index in rows} for rows in units_of.values()]
    assert all(len(k) == 1 for k in keys)  # a slot of a window reads one unit: rows of one shard's group of `unit`
    assert sorted(k.pop() for k in keys) == sorted(
        {(shard, index // unit) for shard, index in in_order}
    )  # each unit once
    present = [p for p, r in enumerate(at.tolist()) if r >= 0]
    unit_at = {p: (in_order[at[p]][0], in_order[at[p]][1] // unit) for p in present}
    assert sum(unit_at[a] == unit_at[b] for a, b in itertools.pairwise(present)) <= 2 * len(
        shard_rows
    )  # neighbours share a unit only where holes leave one slot
    first_window = [{(shard, index // unit) for shard, index in e[: spread * unit // 2]} for e in epochs]
    assert first_window[0] != first_window[1]  # the units are drawn anew each epoch
    inside = [[index for shard, index in rows] for rows in units_of.values() if len(rows) == unit]
    assert sum(rows != sorted(rows) for rows in inside) > 0.8 * len(inside)  # a unit's rows are permuted too


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=6).filter(lambda rows: sum(rows) > 0),
    st.integers(1, 7),
    st.integers(1, 5),
    st.integers(0, 3),
    st.integers(1, 7),
    st.data(),
)
def test_a_spread_order_counts_rows_and_readers_around_its_holes(shard_rows, unit, spread, epoch, parts, data):
    order = GlobalOrder(sum(shard_rows), 5, epoch, None, spread, ShardUnits(shard_rows, unit))
    at = order.rows_at(np.arange(order.positions))
    assert sorted(at[at >= 0].tolist()) == list(range(sum(shard_rows)))  # every row once
    present = np.flatnonzero(at >= 0)
    numbers = np.array(data.draw(st.lists(st.integers(0, sum(shard_rows) - 1), min_size=1, max_size=20)))
    assert order.positions_of(numbers).tolist() == present[numbers].tolist()  # the n-th row's position
    assert order.rows_per_reader(parts).tolist() == np.bincount(present % parts, minlength=parts).tolist()


def test_spread_readers_share_the_order_and_read_only_their_units(cached, in_order):
    spread, unit, readers = 6, 8, 3
    shuffled = cached.global_shuffle(seed=5, spread=spread, unit_rows=unit)
    one = rows_of(shuffled)
    parts = [shuffled.shard_by_rank(r, readers, split="examples").iter() for r in range(readers)]
    taken = [rows_of(it) for it in parts]
    order = GlobalOrder(len(in_order), 5, 0, None, spread, ShardUnits(shard_rows_of(in_order), unit))
    at = order.rows_at(np.arange(order.positions))
    assert order.has_holes and sorted(one) == sorted(in_order)
    for r in range(readers):  # reader r: the rows at positions r mod readers of the one order, holes passed over
        assert taken[r] == [in_order[at[p]] for p in range(r, order.positions, readers) if at[p] >= 0]
    owned = [{(shard, index // unit) for shard, index in rows} for rows in taken]
    shared = set().union(*(a & b for a, b in itertools.combinations(owned, 2)))
    assert (
        all(len(u) > 5 for u in owned) and len(shared) < spread
    )  # a unit is one reader's, but in the last window of fewer units
    decoded = [it.source.source.opened().groups_decoded for it in parts]
    shards = cached._pipeline.root.origin.cache.manifest.shards
    groups = sum(-(-e.rows // 8) for e in shards)
    assert max(decoded) < 0.4 * groups, (decoded, groups)  # about a third each
    # every group once (a unit is a row group), but the last window's (fewer units than
    # readers' slots: readers take rows of each)
    assert sum(decoded) <= groups + (spread - 1) * (readers - 1), (decoded, groups)


def test_spread_resumes_exactly_and_refuses_a_window_beside_it(cached):
    check_resumption(
        lambda: cached.global_shuffle(seed=2, spread=4, unit_rows=8).repeat(2).batch(5), random_steps=6, seed=1
    )
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
        seen += rows_of(shuffled.shard_by_rank(r, 2, split="examples").iter_merged(states))
    assert sorted(seen) == sorted(in_order)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=8).filter(lambda rows: sum(rows) > 0), st.integers(1, 9))
def test_shard_units_cut_each_shard_into_units_and_holes(shard_rows, unit):
    units = ShardUnits(shard_rows, unit)
    starts = np.concatenate([[0], np.cumsum(shard_rows)[:-1]])
    expected = []
    for start, rows in zip(starts, shard_rows):
        cut = -(-rows // unit) * unit
        expected += [int(start) + k if k < rows else -1 for k in range(cut)]  # each shard padded to whole units
    assert units.rows_of(np.arange(units.positions)).tolist() == expected
    assert units.unit_lengths(np.arange(units.units)).tolist() == [
        sum(r >= 0 for r in expected[u * unit : (u + 1) * unit]) for u in range(units.units)
    ]


def test_the_permutation_inverts():
    for n in (1, 2, 3, 100, 1001, 65_537):
        perm = FeistelPermutation(n, (3, n))
        assert perm.inverse(perm(np.arange(n))).tolist() == list(range(n))


@pytest.mark.parametrize("readers", [1, 3])
def test_a_spread_shuffle_skips_past_its_holes_to_where_reading_would_be(cached, readers):
    shuffled = cached.global_shuffle(seed=9, spread=3, unit_rows=8).repeat(2)
    for rank in range(readers):
        reading = [ex for ex in shuffled.shard_by_rank(rank, readers, split="examples")]
        for k in (1, 7, 8, 100, 255, 256, 257, len(reading) // 2 + 3, len(reading) - 5):
            it = shuffled.shard_by_rank(rank, readers, split="examples").iter()
            assert it.seeks and it.skip(k) == k
            assert [(int(e["shard"]), int(e["index"])) for e in itertools.islice(it, 5)] == [
                (int(e["shard"]), int(e["index"])) for e in reading[k : k + 5]
            ], k


def test_a_spread_reader_needs_a_budget_of_one_windows_row_groups(cached):
    """With the decode budget holding K row groups (and not 2K), each row group is decoded once
    an epoch: a fetch never reaches into the next window, whose groups would evict rows the
    same fetch needs, and decoding ahead never drops this window's groups (a window of 40
    units of 8 rows takes two fetches)."""
    spread = 40
    it = cached.global_shuffle(seed=2, spread=spread, unit_rows=8).iter()
    access = it.source.source.opened()
    access.block(np.zeros(1, dtype=np.int64))
    access.pool.max_bytes = int((spread + 0.5) * access.pool.held)  # one decoded group of 8 rows, K and a half times
    access.pool.ahead_min_bytes = 0  # no room to decode the next window ahead: it must not make room from this one
    rows = []
    for e in it:
        rows.append((int(e["shard"]), int(e["index"]) // 8))
        coming = sum(size for _, size in access.pool.ahead.values())
        assert access.pool.held + coming <= access.pool.max_bytes  # decoding ahead stays within the budget
    assert access.groups_decoded <= len(set(rows)) + 1, (access.groups_decoded, len(set(rows)))  # + the probe's group


def test_a_spread_reader_decodes_its_next_window_ahead_within_the_budget(cached):
    """With room for two windows' row groups, the next window's are decoded on a helper thread
    while the reader reads on: the same rows, each group still decoded once."""
    spread = 4
    shuffled = cached.global_shuffle(seed=2, spread=spread, unit_rows=8)
    it = shuffled.iter()
    access = it.source.source.opened()
    access.block(np.zeros(1, dtype=np.int64))
    access.pool.max_bytes = int((2 * spread + 0.5) * access.pool.held)
    access.pool.ahead_min_bytes = 0  # these groups are small enough not to be decoded ahead otherwise
    rows = [(int(e["shard"]), int(e["index"])) for e in it]
    assert rows == rows_of(shuffled)
    assert access.pool.decoded_ahead > 0.8 * len({(s, i // 8) for s, i in rows})
    assert access.groups_decoded <= len({(s, i // 8) for s, i in rows}) + 1

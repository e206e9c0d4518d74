"""Shuffles that look random: windows and epochs get their own permutations, and over many
seeds every item lands in every position about equally often (chi-square bounds loose enough
never to fail on these fixed seeds unless the shuffle is broken)."""

from __future__ import annotations

import numpy as np

from beamtok import Dataset

ITEMS = [f"document {i}" for i in range(64)]


def order_of(ds) -> list[int]:
    return [int(ex["index"]) + 1000 * int(ex["shard"]) for ex in ds]


def chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


def test_every_window_gets_its_own_permutation():
    out = order_of(Dataset.from_sequence(ITEMS).shuffle(window=8, seed=3))
    assert sorted(out) == list(range(64))
    perms = {tuple(np.argsort(out[w : w + 8])) for w in range(0, 64, 8)}
    assert len(perms) >= 7  # 8 windows; a repeated permutation among 8! is all but impossible


def test_every_epoch_gets_its_own_window_permutation():
    out = order_of(Dataset.from_sequence(ITEMS[:16]).repeat(4).shuffle(window=16, seed=3))
    epochs = [tuple(out[e * 16 : (e + 1) * 16]) for e in range(4)]
    assert all(sorted(e) == list(range(16)) for e in epochs) and len(set(epochs)) == 4


def test_every_epoch_gets_its_own_shard_order():
    ds = Dataset.from_sequence(ITEMS, shards=8).shuffle_shards(seed=5).repeat(6)
    shards = [int(ex["shard"]) for ex in ds if int(ex["index"]) == 0]
    orders = {tuple(shards[e * 8 : (e + 1) * 8]) for e in range(6)}
    assert all(sorted(o) == list(range(8)) for o in orders) and len(orders) == 6


def test_window_shuffle_is_uniform_over_seeds():
    counts = np.zeros((8, 8))
    for seed in range(400):
        for position, item in enumerate(order_of(Dataset.from_sequence(ITEMS[:8]).shuffle(window=8, seed=seed))):
            counts[item, position] += 1
    assert counts.min() > 0
    assert chi_square(counts) < 110  # 49 degrees of freedom: p < 1e-6 beyond this


def test_shard_shuffle_is_uniform_over_seeds_and_epochs():
    counts = np.zeros((8, 8))
    for seed in range(200):
        ds = Dataset.from_sequence(ITEMS[:8], shards=8).shuffle_shards(seed=seed).repeat(2)
        order = [int(ex["shard"]) for ex in ds]
        for position, shard in enumerate(order[8:]):  # the second epoch: its seed is (seed, epoch)
            counts[shard, position] += 1
    assert counts.min() > 0
    assert chi_square(counts) < 110

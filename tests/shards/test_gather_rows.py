"""gather_from: rows picked from several blocks, in the order given, equal to copying them one
by one (rows of one length and of many; provenance and counts follow their rows)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok._src.shards.items import DocCounts
from beamtok._src.shards.rows import RowBlock, columns_of, gather_from


def block_of(lengths: list[int], seed: int) -> RowBlock:
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = rng.integers(0, 50_000, int(offsets[-1])).astype(np.int32)
    segments = rng.integers(0, 4, int(offsets[-1])).astype(np.int32)
    provenance = tuple(rng.integers(0, 1000, len(lengths)).astype(np.int64) for _ in range(4))
    counts = [DocCounts(read=int(r), emitted=int(r)) for r in rng.integers(0, 3, len(lengths))]
    return RowBlock(columns_of([("input_ids", ids), ("segment_ids", segments)], offsets), counts, provenance, False)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(1, 9), min_size=1, max_size=12), min_size=1, max_size=4), st.booleans(), st.data())
def test_gather_from_equals_copying_row_by_row(shapes, one_length, data):
    if one_length:
        shapes = [[5] * len(lengths) for lengths in shapes]
    blocks = [block_of(lengths, seed) for seed, lengths in enumerate(shapes)]
    picks = data.draw(
        st.lists(
            st.integers(0, len(blocks) - 1).flatmap(
                lambda b: st.tuples(st.just(b), st.integers(0, len(shapes[b]) - 1))
            ),
            min_size=1,
            max_size=30,
        )
    )
    which = np.array([b for b, _ in picks], dtype=np.int64)
    rows = np.array([r for _, r in picks], dtype=np.int64)
    out = gather_from(blocks, which, rows)
    assert len(out) == len(picks) and out.fresh  # its own arrays: batches may be views of it
    for name in ("input_ids", "segment_ids"):
        expected = [blocks[b].columns[name].rows()[r] for b, r in picks]
        assert [row.tolist() for row in out.columns[name].rows()] == [row.tolist() for row in expected]
    assert out.counts == [blocks[b].counts[r] for b, r in picks]
    assert out.indices == [blocks[b].indices[r] for b, r in picks]
    assert out.docs == [blocks[b].docs[r] for b, r in picks]
    assert out.shard.tolist() == [int(blocks[b].shard[r]) for b, r in picks]
    picked_lengths = {shapes[b][r] for b, r in picks}
    assert out.columns["input_ids"].width == (picked_lengths.pop() if len(picked_lengths) == 1 else None)

"""The cache's file layout: what is stored, what is derived, and caches of the earlier layout.

``tests/data/layout1/`` holds two caches built by beamtok before layout 2 (every token field
stored as nullable lists; the tokenizer copy and build directory taken out of the manifests),
from the small inputs beside them. They must read back as the same stream as the current on-the-fly one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok import CacheError, Dataset
from beamtok._src.cache.format.schema import batch_to_block, examples_to_table
from beamtok._src.shards.items import NO_COUNTS
from beamtok.testing import assert_items_equal, check_resumption

from conftest import ROOT

LAYOUT1 = ROOT / "tests" / "data" / "layout1"
TOKENIZER = "../../../data/tokenizers/gpt2"  # as given when the caches were built (it is in the spec)


def text_pipeline() -> Dataset:
    return Dataset.from_files(["text-0.jsonl", "text-1.jsonl"]).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64)


def sft_pipeline() -> Dataset:
    return Dataset.from_files(["sft-0.jsonl", "sft-1.jsonl"]).tokenize_sft(TOKENIZER, max_length=128).pack_examples(128)


@pytest.fixture
def in_layout1(monkeypatch):
    monkeypatch.chdir(LAYOUT1)  # the caches were built from relative input paths


@pytest.mark.parametrize(("name", "pipeline"), [("text-cache", text_pipeline), ("sft-cache", sft_pipeline)])
def test_layout1_caches_read_as_the_stream(in_layout1, name, pipeline):
    assert "position_ids" in pq.read_schema(LAYOUT1 / name / "shards" / "shard-00000.parquet").names
    cached = Dataset.from_cache(name)
    assert cached.spec_fingerprint == pipeline().spec_fingerprint
    assert_items_equal(list(cached), list(pipeline()))
    assert_items_equal(list(cached.batch(5)), list(pipeline().batch(5)))
    it = cached.iter()
    for _ in it:
        pass
    reference = pipeline().iter()
    for _ in reference:
        pass
    assert it.stats() == reference.stats()
    check_resumption(
        lambda: Dataset.from_cache(name).batch(7), random_steps=4, resume_dataset=lambda: pipeline().batch(7)
    )


@pytest.mark.parametrize(("name", "pipeline"), [("text-cache", text_pipeline), ("sft-cache", sft_pipeline)])
def test_layout2_stores_less_and_reads_the_same(in_layout1, tmp_path, name, pipeline):
    built = pipeline().cache(str(tmp_path / name), progress=False)
    old = sorted((LAYOUT1 / name / "shards").glob("*.parquet"))
    new = sorted((tmp_path / name / "shards").glob("*.parquet"))
    table = pq.read_table(new)
    assert "position_ids" not in table.column_names
    mask = table.column("loss_mask")
    if name == "text-cache":
        assert mask.null_count == table.num_rows  # the mask is the real tokens on every row
    else:
        assert mask.null_count < table.num_rows  # prompts are masked out: stored
    assert sum(p.stat().st_size for p in new) <= sum(p.stat().st_size for p in old)
    assert_items_equal(list(built), list(Dataset.from_cache(str(LAYOUT1 / name))))


def _example(rng: np.random.Generator, width: int | None, sft: bool, index: int) -> dict:
    length = width or int(rng.integers(1, 40))
    pieces = rng.integers(1, 8, size=int(rng.integers(1, 5)))
    segments = np.repeat(np.arange(1, len(pieces) + 1, dtype=np.int32), pieces)[:length]
    segments = np.concatenate([segments, np.zeros(length - len(segments), dtype=np.int32)])
    positions = np.zeros(length, dtype=np.int32)
    for s in range(1, int(segments.max()) + 1):
        where = np.flatnonzero(segments == s)
        positions[where] = np.arange(len(where))
    mask = (segments > 0).astype(np.int8)
    if sft and rng.random() < 0.6:
        mask[: int(rng.integers(0, length + 1))] = 0
    return {
        "input_ids": rng.integers(0, 50000, size=length).astype(np.int32),
        "segment_ids": segments,
        "position_ids": positions,
        "loss_mask": mask,
        "shard": 3,
        "index": index,
        "doc": index * 2,
        "token": index % 5,
    }


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(0, 30),
    width=st.sampled_from([None, 16]),
    sft=st.booleans(),
    cut=st.integers(0, 30),
)
def test_rows_round_trip_through_the_layout(seed, rows, width, sft, cut):
    """Derived positions, null and stored masks, ragged and even rows, sliced tables."""
    rng = np.random.default_rng(seed)
    examples = [_example(rng, width, sft, i) for i in range(rows)]
    table = examples_to_table(examples, [NO_COUNTS] * rows)
    cut = min(cut, rows)
    block = batch_to_block(
        table.slice(cut).combine_chunks().to_batches()[0]
        if rows > cut
        else table.slice(cut).to_batches()[0]
        if table.slice(cut).to_batches()
        else pa.RecordBatch.from_pylist([], schema=table.schema)
    )
    assert len(block) == rows - cut
    for got, want in zip(block.examples, examples[cut:]):
        assert set(got) == set(want)
        for key, value in want.items():
            np.testing.assert_array_equal(got[key], value, err_msg=key)
            if isinstance(value, np.ndarray):
                assert got[key].dtype == value.dtype, key


def test_writer_refuses_positions_the_layout_cannot_derive():
    rng = np.random.default_rng(0)
    example = _example(rng, 16, False, 0)
    example["position_ids"] = np.arange(16, dtype=np.int32)  # counting on across segments
    example["segment_ids"] = np.repeat(np.array([1, 2], dtype=np.int32), 8)
    with pytest.raises(CacheError, match="example 0: position_ids do not restart"):
        examples_to_table([example], [NO_COUNTS])


def test_layout1_cache_copied_elsewhere_still_opens(tmp_path):
    target = tmp_path / "old"
    shutil.copytree(LAYOUT1 / "text-cache", target, symlinks=False)
    rows = list(Dataset.from_cache(str(target)))
    assert len(rows) == 299 and all(len(r["input_ids"]) == 64 for r in rows)
    assert Path(target / "manifest.json").read_text().count('"format": 1') == 1


def test_derived_positions_restart_at_every_run_and_are_zero_on_padding():
    """Positions derived from segment ids, for rows of one width (the quick grid path) and
    ragged rows, equal a row-by-row count: restarting at each run, 0 on padding."""
    import numpy as np

    from beamtok._src.cache.format.schema import derive_positions

    def by_hand(rows):
        out = []
        for row in rows:
            for j, s in enumerate(row):
                out.append(0 if s == 0 or j == 0 or row[j - 1] != s else out[-1] + 1)
        return out

    rng = np.random.default_rng(7)
    for trial in range(200):
        width = int(rng.integers(1, 9))
        rows = []
        for _ in range(int(rng.integers(1, 12))):
            n = width if trial % 2 == 0 else int(rng.integers(1, 9))
            real = int(rng.integers(0, n + 1))
            cuts = set(rng.integers(1, max(real, 1) + 1, size=2).tolist())
            segments, piece = [], 1
            for j in range(real):
                piece += j in cuts
                segments.append(piece)
            rows.append(segments + [0] * (n - real))
        flat = np.array([s for row in rows for s in row], dtype=np.int32)
        offsets = np.cumsum([0] + [len(r) for r in rows])
        assert derive_positions(flat, offsets).tolist() == by_hand(rows), rows

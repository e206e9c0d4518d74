"""An iterator reads nothing and starts no worker before its first next(), whatever the state
it resumes: inside a shuffle window, inside a mix, a global shuffle, a list of states from
another world size, with .parallel(n). Each case counts the reads the stream makes."""

from __future__ import annotations

import itertools
import multiprocessing
import shutil

import pytest

from beamtok import Dataset
from beamtok._src.cache.read.random_access import RowAccess
from beamtok.extend import ShardProcessor

from conftest import CORPUS, TOKENIZER_DIR, cache_without_beam

TOKENIZER = str(TOKENIZER_DIR)


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """Every shard the shard processing opens in this process, and every batch of cache rows
    fetched by global row number."""
    seen: list[str] = []
    documents, rows = ShardProcessor.documents, RowAccess.block  # every shard run reads through documents()
    monkeypatch.setattr(
        ShardProcessor, "documents", lambda self, shard, *a: (seen.append(shard.url), documents(self, shard, *a))[1]
    )
    monkeypatch.setattr(
        RowAccess, "block", lambda self, wanted: (seen.append(f"rows {len(wanted)}"), rows(self, wanted))[1]
    )
    return seen


@pytest.fixture
def files(tmp_path) -> list[str]:
    out = []
    for name in ("shakespeare-00.jsonl", "shakespeare-01.jsonl", "pydocs-00.jsonl.zst"):
        shutil.copy(CORPUS / name, tmp_path / name)
        out.append(str(tmp_path / name))
    return out


def packed(files: list[str]) -> Dataset:
    return Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64)


def state_after(ds: Dataset, items: int) -> dict:
    it = ds.iter()
    for _ in range(items):
        next(it)
    state = it.state_dict()
    it.close()
    return state


def resumes_without_reading(ds: Dataset, state, reads: list[str]) -> None:
    """``iter(state)`` reads nothing; the state it gives back before next() is the
    one it was given; the first next() reads and yields what the uninterrupted run yields."""
    reads.clear()
    it = ds.iter_merged(state) if isinstance(state, list) else ds.iter(state)
    assert reads == [] and not multiprocessing.active_children()
    if isinstance(state, dict):
        assert it.state_dict()["pipeline"] == state["pipeline"]
        assert reads == []
    first = next(it)
    assert reads or multiprocessing.active_children()
    it.close()
    return first


def test_a_state_inside_a_shuffle_window(files, reads):
    ds = packed(files).shuffle(window=32, seed=1).batch(4)
    state = state_after(ds, 3)  # 12 of the window's 32 examples emitted
    assert state["pipeline"]["upstream"]["emitted"] == 12
    first = resumes_without_reading(ds, state, reads)
    expected = next(itertools.islice(ds.iter(), 3, None))
    assert (first["input_ids"] == expected["input_ids"]).all()


def test_a_state_inside_a_mix_and_a_window(files, reads):
    ds = Dataset.mix([packed(files[:2]), packed(files[2:])], [0.7, 0.3], seed=3).shuffle(window=16, seed=0)
    state = state_after(ds, 5)
    first = resumes_without_reading(ds, state, reads)
    assert (first["input_ids"] == next(itertools.islice(ds.iter(), 5, None))["input_ids"]).all()


def test_a_global_shuffle_inside_a_window(files, tmp_path, reads):
    ds = (
        cache_without_beam(packed(files), str(tmp_path / "cache"), row_group_rows=8)
        .global_shuffle(seed=2)
        .shuffle(window=8, seed=0)
    )
    state = state_after(ds, 5)
    first = resumes_without_reading(ds, state, reads)
    assert (first["input_ids"] == next(itertools.islice(ds.iter(), 5, None))["input_ids"]).all()


def test_states_of_another_world_size_inside_windows(files, reads):
    def ds(rank: int, world: int) -> Dataset:
        return packed(files).shard_by_rank(rank, world, split="examples").shuffle(window=8, seed=0)

    states = [state_after(ds(rank, 2), 3) for rank in range(2)]
    assert all(s["pipeline"]["emitted"] == 3 for s in states)  # both stopped inside a window
    resumes_without_reading(ds(0, 3), states, reads)


def test_parallel_workers_start_at_the_first_next(files, reads):
    ds = packed(files).interleave(2).parallel(2).shuffle(window=32, seed=1)
    state = state_after(ds, 10)
    assert not multiprocessing.active_children()
    with ds.iter(state) as it:
        assert not multiprocessing.active_children()
        assert it.state_dict()["pipeline"] == state["pipeline"]
        next(it)
        assert multiprocessing.active_children()

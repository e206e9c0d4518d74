"""Open shards taking turns (``interleave``) hand ``batch()`` their rows in blocks: the rows
of each shard's block at hand are laid out in turn order column-wise. Batches, provenance,
counts and every state between batches equal what the one-row-at-a-time path gives (a
``take`` stage between the source and the batch holds no blocks), on shards of uneven
length, an empty shard, documents that make no row, several epochs, and from worker
processes; and a state from either path resumes the other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from beamtok import Dataset
from beamtok.testing import check_resumption, tiny_tokenizer

from conftest import ROOT, cache_without_beam, real_paragraphs, write_jsonl

TOKENIZER = tiny_tokenizer()  # one token a byte: the rows' layout is what is tested
SHARD_SIZES = [7, 0, 3, 12, 1, 9, 4]  # documents a shard; shard 1 is empty


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("interleave")
    paragraphs = real_paragraphs(sum(SHARD_SIZES))
    paths, start = [], 0
    for i, size in enumerate(SHARD_SIZES):
        records = [{"text": text} for text in paragraphs[start : start + size]]
        if size > 2:
            records.insert(1, {"text": ""})  # a document that makes no row
        start += size
        paths.append(str(write_jsonl(root / f"part-{i}.jsonl", records)))
    return paths


def stream(paths: list[str], open_shards: int, workers: int = 0, epochs: int = 1) -> Dataset:
    ds = (
        Dataset.from_files(paths)
        .tokenize(TOKENIZER)
        .ensure_bos_eos()
        .concat_chunk(24)
        .interleave(open_shards)
        .repeat(epochs)
    )
    return ds.parallel(workers) if workers else ds


def source_state(state: dict[str, Any], stages_above: int) -> dict[str, Any]:
    pipeline = state["pipeline"]
    for _ in range(stages_above):
        pipeline = pipeline["upstream"]
    return pipeline


def batches_and_states(ds: Dataset, size: int, stages_above: int) -> list[tuple[dict[str, np.ndarray], dict[str, Any]]]:
    out = []
    with ds.batch(size).iter() as it:
        for batch in it:
            out.append(({k: np.asarray(v) for k, v in batch.items()}, source_state(it.state_dict(), stages_above)))
    return out


@pytest.mark.parametrize("open_shards", [2, 3, 5])
@pytest.mark.parametrize("size", [1, 2, 4, 7, 64])
def test_blocks_in_turns_are_the_rows_one_at_a_time(shards, open_shards, size):
    ds = stream(shards, open_shards, epochs=2)
    blocks = batches_and_states(ds, size, stages_above=1)
    rows = batches_and_states(ds.take(10**9), size, stages_above=2)
    assert len(blocks) == len(rows) > 3
    for i, ((got, got_state), (want, want_state)) in enumerate(zip(blocks, rows, strict=True)):
        assert got.keys() == want.keys(), i
        for name in want:
            assert np.array_equal(got[name], want[name]), (i, name)
        assert got_state == want_state, i  # slots, cursors, turn, epoch and counts


def test_the_rows_come_from_the_shards_in_turns(shards):
    """Not only equal to the other path: the order is the interleave's (a shard's rows one
    apart in the batch, until shards end)."""
    with stream(shards, 2).batch(6).iter() as it:
        first = next(it)
    assert first["shard"].tolist() == [0, 2, 0, 2, 0, 2]
    assert first["index"].tolist() == [0, 0, 1, 1, 2, 2]


def test_batches_from_workers_are_the_rows_one_at_a_time(shards):
    in_workers = batches_and_states(stream(shards, 3, workers=2), 5, stages_above=1)
    one_at_a_time = batches_and_states(stream(shards, 3).take(10**9), 5, stages_above=2)
    for (got, got_state), (want, want_state) in zip(in_workers, one_at_a_time, strict=True):
        assert all(np.array_equal(got[name], want[name]) for name in want)
        assert got_state == want_state


def test_states_between_block_batches_resume_exactly_in_process_and_in_workers(shards):
    in_process = lambda: stream(shards, 3, epochs=2).batch(4)  # noqa: E731
    in_workers = lambda: stream(shards, 3, workers=2, epochs=2).batch(4)  # noqa: E731
    check_resumption(in_process, random_steps=8, seed=5)
    check_resumption(in_workers, random_steps=3, seed=6, resume_dataset=in_process)


def sft_shards(root: Path) -> list[str]:
    lines = (ROOT / "data" / "sft" / "shakespeare-dialogue.jsonl").read_text().splitlines()[:200]
    return [str(write_jsonl(root / f"sft-{i}.jsonl", [json.loads(line) for line in lines[i::4]])) for i in range(4)]


@pytest.mark.parametrize("kind", ["ragged", "records", "sft"])
def test_rows_of_every_kind_from_workers_take_turns_too(shards, tmp_path, kind):
    """Workers send blocks of rows of several lengths (no packing), of raw records, and of
    padded SFT rows whose labels and attention mask the batch adds: those are laid out in
    turns too (gathered, or stacked with the training fields)."""
    build = {
        "ragged": lambda: Dataset.from_files(shards).tokenize(TOKENIZER).interleave(3),
        "records": lambda: Dataset.from_files(shards).interleave(3),
        "sft": lambda: (
            Dataset.from_files(sft_shards(tmp_path))
            .tokenize_sft(TOKENIZER, max_length=96)
            .pack_examples(96)
            .interleave(3)
        ),
    }[kind]
    with build().parallel(2).batch(5).iter() as it:
        got = list(it)
    with build().take(10**9).batch(5).iter() as it:
        want = list(it)
    assert len(got) == len(want) > 3
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys()
        for name in b:
            if isinstance(b[name], list):
                assert a[name] == b[name], name
            else:
                assert np.array_equal(np.asarray(a[name]), np.asarray(b[name])), name
    if kind == "sft":
        assert {"labels", "attention_mask", "loss_mask"} <= set(got[0])


def test_an_sft_cache_read_in_turns_gives_the_rows_one_at_a_time(tmp_path):
    """A cache of SFT rows stores no labels or attention mask: the batch adds them to rows
    laid out in turns as it does to rows read one at a time."""
    sft = Dataset.from_files(sft_shards(tmp_path)).tokenize_sft(TOKENIZER, max_length=96).pack_examples(96)
    cached = cache_without_beam(sft, str(tmp_path / "cache"), row_group_rows=4).interleave(3)
    got = batches_and_states(cached, 5, stages_above=1)
    want = batches_and_states(cached.take(10**9), 5, stages_above=2)
    assert len(got) == len(want) > 3
    for (a, a_state), (b, b_state) in zip(got, want, strict=True):
        assert a.keys() == b.keys() and {"labels", "attention_mask"} <= set(a)
        assert all(np.array_equal(a[name], b[name]) for name in b) and a_state == b_state


def test_the_source_hands_blocks_where_shards_take_turns(shards):
    """The block path is taken: once each open shard has a block at hand, a batch of rows in
    turns is one gathered piece, not a row per piece (the path this module compares against
    the rows one at a time). Each shard's first row comes alone: its block is found then."""
    with stream(shards, 2).iter() as it:
        assert [p.rows for p in it.source.next_rows(2)] == [1, 1]
        pieces = it.source.next_rows(6)
    assert [p.rows for p in pieces] == [6] and pieces[0].block.shard.tolist() == [0, 2] * 3

"""Caching while streaming: the stream is the on-the-fly stream, the cache is a Beam build's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from beamtok import CacheError, Dataset
from beamtok._src.cache.build import as_you_go
from beamtok._src.shards.processor import ShardProcessor
from beamtok.testing import assert_items_equal, check_resumption

from conftest import ROOT, TOKENIZER_DIR, real_paragraphs, write_jsonl

TOKENIZER = str(TOKENIZER_DIR)


@pytest.fixture
def files(tmp_path):
    paragraphs = real_paragraphs(150)
    return [
        str(write_jsonl(tmp_path / f"part-{i}.jsonl", [{"text": p} for p in paragraphs[i * 50 : (i + 1) * 50]]))
        for i in range(3)
    ]


def packed(files):
    return Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(48)


def finish_writers(it) -> None:
    it.source.backend.wait(timeout=30)


@pytest.fixture
def tokenized_shards(monkeypatch):
    """The URLs of the shards the shard processing runs over (the real processing runs)."""
    seen: list[str] = []
    real = ShardProcessor.documents

    def counting(self, shard, start=0, stop=None):
        seen.append(shard.url)
        return real(self, shard, start, stop)

    monkeypatch.setattr(ShardProcessor, "documents", counting)
    return seen


def test_caching_run_equals_on_the_fly_and_writes_a_beam_builds_bytes(files, tmp_path, tokenized_shards):
    on_the_fly = list(packed(files).batch(3))
    caching = packed(files).cache_as_you_go(str(tmp_path / "c")).batch(3)
    it = caching.iter()
    first = list(it)
    finish_writers(it)
    assert_items_equal(first, on_the_fly)
    assert (tmp_path / "c" / "manifest.json").exists()
    packed(files).cache(str(tmp_path / "beam"), progress=False)
    for i in range(3):
        ours, theirs = (
            json.loads((tmp_path / d / "records" / f"shard-{i:05d}.json").read_text()) for d in ("c", "beam")
        )
        assert (
            "document_tokens" in theirs and "document_tokens" not in ours
        )  # the stream hands rows over, not documents
        del theirs["document_tokens"]
        assert ours == theirs  # size, SHA-256, rows, tokens, document counts, footer checksum
        assert (tmp_path / "c" / "shards" / f"shard-{i:05d}.parquet").read_bytes() == (
            tmp_path / "beam" / "shards" / f"shard-{i:05d}.parquet"
        ).read_bytes()
    assert_items_equal(list(Dataset.from_cache(str(tmp_path / "c")).batch(3)), on_the_fly)
    tokenized_shards.clear()
    second = caching.iter()
    assert_items_equal(list(second), on_the_fly)
    assert tokenized_shards == []  # epoch 2 reads the cache: nothing tokenized
    assert second.stats()["documents"] == it.stats()["documents"]


def test_an_interrupted_run_caches_what_it_read_whole_and_the_next_tokenizes_only_the_rest(
    files, tmp_path, tokenized_shards
):
    caching = packed(files).cache_as_you_go(str(tmp_path / "c"))
    everything = list(packed(files))
    first_shard = sum(1 for ex in everything if ex["shard"] == 0)
    it = caching.iter()
    head = [next(it) for _ in range(first_shard + 5)]  # all of shard 0, part of shard 1
    it.close()
    finish_writers(it)
    assert sorted(os.listdir(tmp_path / "c" / "shards")) == [
        "shard-00000.parquet"
    ]  # shard 1 was left part-read: not cached
    assert sorted(os.listdir(tmp_path / "c" / "records")) == ["shard-00000.json"]
    assert not (tmp_path / "c" / "manifest.json").exists()
    with pytest.raises(CacheError, match="unfinished"):
        Dataset.from_cache(str(tmp_path / "c"))
    tokenized_shards.clear()
    again = caching.iter()
    assert_items_equal(list(again), everything)
    assert tokenized_shards == files[1:]  # shard 0 came from the cache
    finish_writers(again)
    assert (tmp_path / "c" / "manifest.json").exists()
    assert_items_equal(head, everything[: len(head)])


def test_states_cross_between_caching_cached_and_on_the_fly(files, tmp_path):
    directory = str(tmp_path / "c")
    check_resumption(
        lambda: packed(files).batch(2),
        random_steps=4,
        resume_dataset=lambda: packed(files).cache_as_you_go(directory).batch(2),
    )
    check_resumption(
        lambda: packed(files).cache_as_you_go(directory).shuffle(8, seed=2).batch(2),
        random_steps=4,
        resume_dataset=lambda: packed(files).shuffle(8, seed=2).batch(2),
    )
    it = packed(files).cache_as_you_go(directory).iter()
    list(it)
    finish_writers(it)
    check_resumption(
        lambda: packed(files).cache_as_you_go(directory).batch(2),
        random_steps=4,
        resume_dataset=lambda: Dataset.from_cache(directory).batch(2),
    )


def test_a_killed_run_leaves_no_complete_looking_cache_and_beam_finishes_it(files, tmp_path):
    directory = tmp_path / "c"
    first_shard = sum(1 for ex in packed(files) if ex["shard"] == 0)
    code = (
        "import os, sys, time\n"
        "from beamtok import Dataset\n"
        f"ds = Dataset.from_files({files!r}).tokenize({TOKENIZER!r}).ensure_bos_eos().concat_chunk(48).cache_as_you_go({str(directory)!r})\n"
        f"it = ds.iter()\nfor _ in range({first_shard} + 7): next(it)\n"
        # shard 0's writer finishes (shard 1's waits for rows that never come: not joined)
        "[w.join(timeout=30) for w in it.source.backend.writers if w.shard.index == 0]\n"
        "os._exit(9)\n"
    )
    killed = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    visible = sorted(f"{d}/{n}" for d in ("shards", "records") for n in os.listdir(directory / d) if ".tmp-" not in n)
    assert (
        visible == ["records/shard-00000.json", "shards/shard-00000.parquet"]
        and not (directory / "manifest.json").exists()
    )
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "beamtok._src.cli",
            "cache",
            *files,
            "-o",
            str(directory),
            "--tokenizer",
            TOKENIZER,
            "--seq-len",
            "48",
            "-v",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    assert '"shards_reused": 1' in built.stderr and '"shards_written": 2' in built.stderr
    assert_items_equal(list(Dataset.from_cache(str(directory))), list(packed(files)))


def test_the_writer_never_holds_the_stream_up(files, tmp_path, monkeypatch):
    """A writer that falls QUEUE_ITEMS handoffs behind gives its shard up; the stream goes on
    unchanged. Counted, not timed: when the stream has handed out every row, the crawling writer
    has taken only the few rows its queue held."""
    import time

    monkeypatch.setattr(as_you_go, "QUEUE_ITEMS", 2)
    monkeypatch.setattr(as_you_go, "HANDOFF", 1)
    real = as_you_go.write_rows
    taken = [0]

    def slow(storage, shard, rows, *args, **kwargs):
        def crawling():
            for row in rows:
                taken[0] += 1
                time.sleep(0.05)
                yield row

        return real(storage, shard, crawling(), *args, **kwargs)

    monkeypatch.setattr(as_you_go, "write_rows", slow)
    it = packed(files).cache_as_you_go(str(tmp_path / "c")).iter()
    items = list(it)
    assert taken[0] <= 3 * len(files) * 4 < len(items)  # a handful per shard: the stream never waited for the writer
    finish_writers(it)
    assert_items_equal(items, list(packed(files)))
    assert not [n for n in os.listdir(tmp_path / "c" / "shards") if n.endswith(".parquet")]


def test_a_shard_resumed_part_way_is_not_cached_until_read_whole(files, tmp_path):
    directory = str(tmp_path / "c")
    everything = list(packed(files))
    first_shard = sum(1 for ex in everything if ex["shard"] == 0)
    it = packed(files).cache_as_you_go(directory).iter()
    for _ in range(first_shard + 5):  # all of shard 0, part of shard 1
        next(it)
    state = it.state_dict()
    it.close()
    finish_writers(it)
    resumed = packed(files).cache_as_you_go(directory).iter(state)
    rest = list(resumed)
    finish_writers(resumed)
    assert_items_equal(rest, everything[first_shard + 5 :])
    written = sorted(n for n in os.listdir(tmp_path / "c" / "shards") if n.endswith(".parquet"))
    assert written == ["shard-00000.parquet", "shard-00002.parquet"]  # shard 1 was read from its middle
    assert not (tmp_path / "c" / "manifest.json").exists()
    again = packed(files).cache_as_you_go(directory).iter()
    assert_items_equal(list(again), everything)
    finish_writers(again)
    assert_items_equal(list(Dataset.from_cache(directory)), everything)


def test_mistakes(files, tmp_path):
    packed(files).cache(str(tmp_path / "c"), progress=False)
    other = (
        Dataset.from_files(files)
        .tokenize(TOKENIZER)
        .ensure_bos_eos()
        .concat_chunk(64)
        .cache_as_you_go(str(tmp_path / "c"))
    )
    with pytest.raises(
        CacheError,
        match=r"holds a cache built with spec \w+, not \w+ \(pack.seq_len 48 → 64\); cache_as_you_go\(\) never replaces a cache",
    ):
        next(iter(other))
    with pytest.raises(Exception, match="before shuffle/batch"):
        packed(files).batch(2).cache_as_you_go(str(tmp_path / "d"))
    with pytest.raises(Exception, match="call tokenize"):
        Dataset.from_files(files).cache_as_you_go(str(tmp_path / "d"))
    with pytest.raises(Exception, match="in-memory data"):
        Dataset.from_sequence(["a b c"]).tokenize(TOKENIZER).concat_chunk(8).cache_as_you_go(str(tmp_path / "d"))
    assert not Path(tmp_path / "d").exists()


def test_a_run_that_ends_right_after_its_last_example_still_lands_its_shards(files, tmp_path):
    """At interpreter exit the writers of shards read whole finish (and a writer inside pyarrow
    during shutdown would abort the process)."""
    code = (
        "from beamtok import Dataset\n"
        f"ds = Dataset.from_files({files!r}).tokenize({TOKENIZER!r}).ensure_bos_eos().concat_chunk(48).cache_as_you_go({str(tmp_path / 'c')!r})\n"
        "it = ds.iter()\n"
        "for _ in it: pass\n"
    )
    finished = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert (tmp_path / "c" / "manifest.json").exists()
    assert_items_equal(list(Dataset.from_cache(str(tmp_path / "c"))), list(packed(files)))

"""The live view: each stage's own time and the consumer's stall, from real slow parts."""

from __future__ import annotations

import io
import json
import time

from beamtok import Dataset
from beamtok.testing import tiny_tokenizer

TOKENIZER = tiny_tokenizer()  # a stage test: what a token is does not matter


def slow_documents(record):
    time.sleep(0.004)  # a slow per-document step: the source is the bottleneck
    return record


def pipeline(paths, slow_source: bool):
    ds = Dataset.from_files(paths)
    if slow_source:
        ds = ds.map(slow_documents, name="slow")
    return ds.tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64).shuffle(16, seed=1).batch(4)


def test_a_slow_source_shows_as_stall_and_as_the_source_s_share(make_shards):
    paths = make_shards(2, docs_per_shard=30)
    it = pipeline(paths, slow_source=True).iter()
    for _ in it:
        pass
    timing = it.timing()
    names = [s["stage"] for s in timing["stages"]]
    assert names == ["source (shard source)", "stage 1 (shuffle)", "stage 2 (batch)"]
    source = timing["stages"][0]
    assert source["share"] > 0.9 and source["seconds"] > 60 * 0.004 * 0.9
    assert timing["stall"] > 0.9  # the loop did nothing but wait
    assert timing["stages"][2]["items"] == it.stats()["delivered"]["items"]


def test_a_slow_consumer_shows_a_low_stall(make_shards):
    paths = make_shards(2, docs_per_shard=30)
    it = pipeline(paths, slow_source=False).iter()
    for _ in it:
        time.sleep(0.02)  # the training step
    timing = it.timing()
    assert timing["stall"] < 0.5
    assert timing["consumer_seconds"] >= 0.02 * (it.stats()["delivered"]["items"] - 1) * 0.9


def test_batches_straight_from_a_cache_are_timed_at_the_source(make_shards, tmp_path):
    paths = make_shards(2, docs_per_shard=20)
    cache = Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64).cache(str(tmp_path / "c"))
    it = cache.global_shuffle(seed=2).batch(4).iter()
    rows = sum(len(b["input_ids"]) for b in it)
    source = it.timing()["stages"][0]
    assert source["stage"] == "source (global shuffle)" and source["items"] == rows  # rows pulled through next_rows


def test_timing_stays_out_of_stats_and_state_but_prints_on_request(make_shards):
    paths = make_shards(1, docs_per_shard=10)
    it = pipeline(paths, slow_source=False).iter()
    next(it)
    assert "timing" not in it.stats() and "timing" in it.stats(timing=True)
    assert '"timing"' not in json.dumps(it.state_dict()) and '"stall"' not in json.dumps(it.state_dict())
    out = io.StringIO()
    it.print_timing(file=out)
    assert "source (shard source)" in out.getvalue() and "stall" in out.getvalue()

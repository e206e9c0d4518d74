"""A local multi-process build starts no more workers than its input has pieces of work
(beamtok._src.beam.worker_count): each worker costs its start-up whether or not it gets work."""

from __future__ import annotations

import logging

from beamtok import Dataset
from beamtok._src.beam.worker_count import fitted_worker_args, pieces_at_most
from beamtok._src.sources.urls import Shard

from conftest import CORPUS, TOKENIZER_DIR, shakespeare_copies

SMALL = str(CORPUS / "shakespeare-00.jsonl")  # ~1 MB
MULTI = ["--direct_running_mode=multi_processing"]


def shards(*urls: str) -> list[Shard]:
    return [Shard(i, url) for i, url in enumerate(urls)]


def test_pieces_are_files_and_the_ranges_large_files_are_cut_into(tmp_path):
    size = (CORPUS / "shakespeare-00.jsonl").stat().st_size
    assert pieces_at_most(shards(SMALL), None) == 1
    assert pieces_at_most(shards(SMALL, SMALL), size) == 2
    assert pieces_at_most(shards(SMALL), size // 3) == 3 and pieces_at_most(shards(SMALL), size // 3 - 1) == 4
    assert pieces_at_most([Shard(0, "memory://0", data=["a"])], None) is None
    assert pieces_at_most(shards("s3://bucket/a.jsonl"), None) is None


def test_more_workers_than_pieces_are_cut_to_the_pieces(caplog):
    with caplog.at_level(logging.WARNING, logger="beamtok._src.beam.worker_count"):
        args = fitted_worker_args([*MULTI, "--direct_num_workers=4"], shards(SMALL, SMALL), None)
    assert args == [*MULTI, "--direct_num_workers=2"]
    assert "4 worker processes asked for, but the input makes at most 2 piece(s) of work" in caplog.text
    assert fitted_worker_args([*MULTI, "--direct_num_workers", "3"], shards(SMALL), None) == [
        *MULTI,
        "--direct_num_workers=1",
    ]
    # as many as pieces, in-process builds, remote runners and unknown inputs are left alone
    for args, given in (
        ([*MULTI, "--direct_num_workers=2"], shards(SMALL, SMALL)),
        (["--direct_num_workers=4"], shards(SMALL)),
        ([*MULTI, "--direct_num_workers=4", "--runner=DataflowRunner"], shards(SMALL)),
        ([*MULTI, "--direct_num_workers=4"], shards("gs://bucket/a.jsonl")),
    ):
        assert fitted_worker_args(args, given, None) == args


def test_a_small_build_asked_for_two_workers_runs_one_and_writes_the_same_cache(tmp_path, caplog):
    ds = Dataset.from_files([SMALL]).tokenize(str(TOKENIZER_DIR)).ensure_bos_eos().concat_chunk(256)
    with caplog.at_level(logging.WARNING, logger="beamtok._src.beam.worker_count"):
        two = ds.cache(
            str(tmp_path / "two"), progress=False, direct_running_mode="multi_processing", direct_num_workers=2
        )
    assert "starting 1" in caplog.text
    one = ds.cache(str(tmp_path / "one"), progress=False)
    a = two.pipeline.root.origin.cache.manifest.column("sha256")
    b = one.pipeline.root.origin.cache.manifest.column("sha256")
    assert list(a) == list(b)


def test_files_enough_for_the_workers_keep_them(tmp_path):
    paths = shakespeare_copies(tmp_path, 3)
    assert fitted_worker_args([*MULTI, "--direct_num_workers=2"], shards(*paths), None)[-1] == "--direct_num_workers=2"

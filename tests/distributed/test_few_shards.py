"""Any cache on any number of readers: ``DistributedLoader``'s default ``split="auto"`` reads a
cache of fewer shards than readers by examples (each reader keeps its share of every row)
instead of refusing it; every row is read once, and a state resumes on another number of
readers with the rest read once; a resume keeps the split the states were saved with."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from beamtok import ConfigError, Dataset

from conftest import TOKENIZER_DIR, cache_without_beam, paragraph_files

pytest.importorskip("torch")
pytest.importorskip("torchdata")

from beamtok._src.distributed.torch_loader import DistributedLoader


@pytest.fixture(scope="module")
def one_shard(tmp_path_factory) -> Dataset:
    root = tmp_path_factory.mktemp("one-shard")
    files = paragraph_files(root, files=1, per_file=60)
    ds = Dataset.from_files(files).tokenize(str(TOKENIZER_DIR)).ensure_bos_eos().concat_chunk(64)
    cached = cache_without_beam(ds, str(root / "cache"))
    assert len(cached.shards) == 1
    return cached


def rows(batches) -> list[tuple[int, int]]:
    return [(int(s), int(i)) for b in batches for s, i in zip(b["shard"].tolist(), b["index"].tolist())]


def test_a_one_shard_cache_is_read_by_two_workers_and_resumed_by_three(one_shard):
    everything = Counter(rows(one_shard.batch(4).iter()))
    with pytest.raises(ConfigError, match="1 shard"):
        DistributedLoader(one_shard.batch(4), split="shards", num_workers=2)  # asked for by name: refused
    loader = DistributedLoader(one_shard.batch(4), even=None, num_workers=2)
    assert loader.dataset.pipeline.reader.mode == "examples"
    first = rows(itertools.islice(loader, 7))
    state = loader.state_dict()
    loader.close()
    resumed = DistributedLoader(one_shard.batch(4), even=None, num_workers=3)
    resumed.load_state_dict(state)
    rest = rows(resumed)
    assert Counter(first) + Counter(rest) == everything
    whole = DistributedLoader(one_shard.batch(4), even=None, num_workers=0)  # one reader: by shards
    assert whole.dataset.pipeline.reader.mode == "shards"
    whole.load_state_dict(state)  # states of an example split: it reads by examples to merge them
    assert Counter(first) + Counter(rows(whole)) == everything

"""A packed cache read through grain (beamtok._src.grain_source): row for row what from_cache
yields, through grain's MapDataset, and through its DataLoader with worker processes and its
own checkpoint, resumed exactly."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

from beamtok import CacheError, ConfigError, Dataset
from beamtok.testing import assert_items_equal

from conftest import CORPUS, TOKENIZER_DIR

FILES = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    # grain is imported by the tests that run, not at collection: importing it costs each
    # xdist worker ~1.5 s of CPU, and only one of them runs this module
    pytest.importorskip("grain")
    directory = tmp_path_factory.mktemp("grain") / "cache"
    ds = Dataset.from_files(FILES).tokenize(str(TOKENIZER_DIR)).ensure_bos_eos().concat_chunk(128)
    ds.cache(str(directory), progress=False, row_group_rows=64)
    return str(directory)


def data_source(cache: str, **options):
    """``beamtok._src.grain_source.CacheDataSource`` over ``cache`` (imported when first used)."""
    from beamtok._src.grain_source import CacheDataSource

    return CacheDataSource(cache, **options)


def test_rows_by_number_are_the_rows_from_cache_yields(cache):
    source = data_source(cache)
    want = list(Dataset.from_cache(cache).iter())
    assert len(source) == len(want) > 1000
    assert_items_equal([source[i] for i in range(len(source))], want)
    picked = [7, len(source) - 1, 0, 7, 300]
    assert_items_equal(source.__getitems__(picked), [want[i] for i in picked])
    assert_items_equal([source[-1]], [want[-1]])
    with pytest.raises(IndexError, match=f"row {len(source)} is past the cache's {len(source)} rows"):
        source[len(source)]


def test_a_copy_reopens_the_cache(cache):
    source = data_source(cache)
    source[5]  # opens files and decodes a row group
    copy = pickle.loads(pickle.dumps(source))
    assert copy._access is None
    assert_items_equal([copy[5], copy[900]], [source[5], source[900]])


def test_grain_map_dataset_shuffles_and_batches_it(cache):
    import grain

    source = data_source(cache)
    ds = grain.MapDataset.source(source).shuffle(seed=3).batch(8, drop_remainder=True)
    batches = [ds[i] for i in range(len(ds))]
    seen = np.concatenate([b["index"] + 10_000 * b["shard"] for b in batches])
    rows = {int(r["index"]) + 10_000 * int(r["shard"]) for r in Dataset.from_cache(cache).iter()}
    assert len(seen) == len(set(seen.tolist())) == (len(source) // 8) * 8 and set(seen.tolist()) <= rows
    assert batches[0]["input_ids"].shape == (8, 128)


def loader(source, workers):
    import grain.python as gp
    from absl import flags

    flags.FLAGS.mark_as_parsed()  # grain's workers read absl flags, parsed by absl.app in a real job
    return gp.DataLoader(
        data_source=source,
        sampler=gp.IndexSampler(len(source), shard_options=gp.NoSharding(), shuffle=True, seed=5, num_epochs=1),
        operations=[gp.Batch(4, drop_remainder=True)],
        worker_count=workers,
    )


@pytest.mark.parametrize("workers", [0])
def test_grain_s_loader_with_workers_resumes_from_its_own_checkpoint(cache, workers):
    source = data_source(cache)
    whole = list(itertools.islice(iter(loader(source, workers)), 40))
    it = iter(loader(source, workers))
    first = list(itertools.islice(it, 17))
    state = it.get_state()
    resumed = iter(loader(source, workers))
    resumed.set_state(state)
    rest = list(itertools.islice(resumed, 23))
    assert_items_equal(first + rest, whole)
    order = np.concatenate([b["index"] + 10_000 * b["shard"] for b in whole])
    assert len(set(order.tolist())) == len(order)  # no row twice


def test_refusals(cache, tmp_path):
    unpacked = tmp_path / "unpacked"
    Dataset.from_files(FILES[:1]).tokenize(str(TOKENIZER_DIR)).cache(str(unpacked), progress=False)
    with pytest.raises(ConfigError, match="an unpacked cache has no rows to address"):
        data_source(str(unpacked))
    with pytest.raises(CacheError):
        data_source(str(tmp_path / "nothing"))


@pytest.mark.slow  # threads reading at once, many rounds: make test-fast leaves it out
def test_rows_read_on_many_threads_at_once_are_the_rows(cache):
    """grain reads records on a pool of threads: concurrent reads of one source (one open
    file, one decode cache) must give each its own row (they raced inside pyarrow once)."""
    from concurrent.futures import ThreadPoolExecutor

    source = data_source(cache, max_bytes=1)  # nothing kept: every read decodes its row group
    want = list(Dataset.from_cache(cache).iter())
    keys = np.random.default_rng(0).permutation(len(source)).tolist()
    for _ in range(3):
        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(source.__getitem__, keys))
        assert_items_equal(got, [want[k] for k in keys])

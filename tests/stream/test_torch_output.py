"""Torch output: tensor batches, and the IterableDataset adapter with DataLoader workers."""

from __future__ import annotations

import json

import pytest

from beamtok import Dataset
from beamtok.testing import check_resumption, items_equal

torch = pytest.importorskip("torch")


def make(paths, tokenizer_dir):
    return Dataset.from_files(paths).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(32).batch(3, tensors="torch")


def test_tensor_batches_resume(make_shards, tokenizer_dir):
    paths = make_shards(2, docs_per_shard=6)
    batch = next(iter(make(paths, tokenizer_dir)))
    assert batch["input_ids"].dtype == torch.int32 and batch["input_ids"].shape == (3, 32)
    check_resumption(lambda: make(paths, tokenizer_dir))


def test_adapter_state_dict_round_trip(make_shards, tokenizer_dir):
    paths = make_shards(2, docs_per_shard=6)
    ds = make(paths, tokenizer_dir)
    loader = torch.utils.data.DataLoader(ds.to_torch(), batch_size=None)
    full = list(loader)
    adapter = ds.to_torch()
    it = iter(torch.utils.data.DataLoader(adapter, batch_size=None))
    head = [next(it) for _ in range(4)]
    state = json.loads(json.dumps(adapter.state_dict()))
    resumed = ds.to_torch()
    resumed.load_state_dict(state)
    rest = list(torch.utils.data.DataLoader(resumed, batch_size=None))
    assert all(items_equal(a, b) for a, b in zip(head + rest, full)) and len(head + rest) == len(full)


def test_dataloader_workers_split_shards(make_shards, tokenizer_dir):
    paths = make_shards(4, docs_per_shard=5)
    ds = Dataset.from_files(paths).tokenize(tokenizer_dir).concat_chunk(32)
    loader = torch.utils.data.DataLoader(ds.to_torch(), batch_size=None, num_workers=2)
    got = sorted((int(e["shard"]), int(e["index"])) for e in loader)
    want = sorted((e["shard"], e["index"]) for e in ds)
    assert got == want  # every example exactly once across the two workers


def stateful_loader(ds, workers):
    from torchdata.stateful_dataloader import StatefulDataLoader

    return StatefulDataLoader(ds.to_torch(), batch_size=None, num_workers=workers)


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_stateful_dataloader_resumes_exactly(make_shards, tokenizer_dir, workers):
    pytest.importorskip("torchdata")
    paths = make_shards(4, docs_per_shard=6)
    ds = make(paths, tokenizer_dir).shuffle_shards(seed=1)
    full = list(stateful_loader(ds, workers))
    assert len(full) > 8
    for k in (0, 1, 3, len(full) // 2, len(full) - 1):
        loader = stateful_loader(ds, workers)
        it = iter(loader)
        head = [next(it) for _ in range(k)]
        state = json.loads(json.dumps(loader.state_dict()))
        del it
        resumed = stateful_loader(ds, workers)
        resumed.load_state_dict(state)
        rest = list(resumed)
        got = head + rest
        assert len(got) == len(full) and all(items_equal(a, b) for a, b in zip(got, full)), f"resume after {k} batches"


def test_plain_dataloader_with_workers_refuses_a_state(make_shards, tokenizer_dir):
    paths = make_shards(4, docs_per_shard=6)
    adapter = make(paths, tokenizer_dir).to_torch()
    it = iter(torch.utils.data.DataLoader(adapter, batch_size=None, num_workers=2))
    next(it)
    next(it)
    from beamtok import StateError

    with pytest.raises(StateError, match="StatefulDataLoader"):
        adapter.state_dict()


def test_state_of_a_never_iterated_adapter_starts_nothing(make_shards, tokenizer_dir):
    import multiprocessing

    paths = make_shards(4, docs_per_shard=6)
    ds = make(paths, tokenizer_dir).parallel(2)
    state = ds.to_torch().state_dict()
    assert not multiprocessing.active_children()
    assert state == json.loads(json.dumps(ds.iter().state_dict()))


@pytest.mark.parametrize("tensors", ["torch", "numpy"])
def test_default_dataloader_batch_size_passes_beamtok_batches_through(make_shards, tokenizer_dir, tensors):
    from beamtok import ConfigError

    paths = make_shards(2, docs_per_shard=6)
    ds = Dataset.from_files(paths).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(32).batch(3, tensors=tensors)
    unbatched = list(torch.utils.data.DataLoader(ds.to_torch(), batch_size=None))
    default = list(torch.utils.data.DataLoader(ds.to_torch()))  # batch_size=1: no extra leading dimension
    assert len(default) == len(unbatched) and default[0]["input_ids"].shape == (3, 32)
    assert all(isinstance(b["input_ids"], torch.Tensor) for b in default)
    assert all(items_equal(a, b) for a, b in zip(default, unbatched))
    with pytest.raises(ConfigError, match=r"batches 2 of beamtok's batches together.*batch_size=None"):
        next(iter(torch.utils.data.DataLoader(ds.to_torch(), batch_size=2)))
    examples = Dataset.from_files(paths).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(32)
    assert next(iter(torch.utils.data.DataLoader(examples.to_torch(), batch_size=4)))["input_ids"].shape == (4, 32)


def test_another_number_of_workers_is_refused_with_the_way_that_works(make_shards, tokenizer_dir):
    pytest.importorskip("torchdata")
    import beamtok

    paths = make_shards(4, docs_per_shard=6)
    ds = make(paths, tokenizer_dir)
    loader = stateful_loader(ds, 2)
    it = iter(loader)
    head = [next(it) for _ in range(3)]
    state = json.loads(json.dumps(loader.state_dict()))
    del it
    wrong = stateful_loader(ds, 1)
    wrong.load_state_dict(state)
    with pytest.raises(
        Exception,
        match=r"saved by DataLoader worker \d of 2, this is worker 0 of 1.*to_torch\(resume_from=beamtok.reader_states",
    ):
        next(iter(wrong))
    from torchdata.stateful_dataloader import StatefulDataLoader

    right = StatefulDataLoader(ds.to_torch(resume_from=beamtok.reader_states(state)), batch_size=None, num_workers=1)
    rest = list(right)
    full = list(stateful_loader(ds, 0))

    def rows(batches):
        return sorted((int(s), int(i)) for b in batches for s, i in zip(b["shard"], b["index"]))

    assert rows(head + rest) == rows(full)  # every row once: none lost, none repeated


def _engine_built_in_worker(flags, fingerprint, worker_id):
    from beamtok._src.transforms import tokenizer_registry

    flags[worker_id] = tokenizer_registry._CACHE[fingerprint]._choice is not None


def test_forked_workers_start_with_the_encoders_built_here(make_shards, tokenizer_dir, tmp_path, monkeypatch):
    """Made where DataLoader workers fork, the adapter builds the fast-path encoder of every
    source that tokenizes (a mix's too) before any worker starts, so none builds its own; a
    cache source, read as written, loads no tokenizer."""
    import functools
    import multiprocessing

    from beamtok._src.transforms import tokenizer_registry

    from conftest import cache_without_beam

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("workers fork only where the platform can")
    paths = make_shards(4, docs_per_shard=5)
    cache_without_beam(Dataset.from_files(paths[:2]).tokenize(tokenizer_dir).concat_chunk(32), str(tmp_path / "c"))
    monkeypatch.setattr(
        tokenizer_registry, "_BY_NAME", {}
    )  # a tokenizer this process built before would hide the build
    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})
    cached = Dataset.from_cache(str(tmp_path / "c"))
    cached.to_torch()
    assert tokenizer_registry._CACHE == {}

    on_the_fly = Dataset.from_files(paths[2:]).tokenize(tokenizer_dir).concat_chunk(32)
    (tok,) = tokenizer_registry._CACHE.values()
    assert tok._choice is None  # loaded by tokenize(), its engine not chosen yet
    adapter = Dataset.mix([cached, on_the_fly], [0.5, 0.5], seed=0, max_epochs=1).to_torch()
    assert tok._choice is not None and tok.engine_choice.encoder is not None, tok.engine
    flags = multiprocessing.Array("b", [0, 0], lock=False)
    loader = torch.utils.data.DataLoader(
        adapter,
        batch_size=None,
        num_workers=2,
        multiprocessing_context="fork",
        worker_init_fn=functools.partial(_engine_built_in_worker, flags, tok.fingerprint),
    )
    assert len(list(loader)) > 0
    assert list(flags) == [1, 1]

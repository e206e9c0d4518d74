"""A batch crosses from a DataLoader worker to the training process as one buffer
(beamtok._src.stream.one_buffer): the same fields, dtypes, shapes and values as the batch read in
one process, and the loader's state still resumes exactly."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

from beamtok import Dataset  # noqa: E402
from beamtok._src.stream.one_buffer import OneBufferBatch, in_one_buffer  # noqa: E402
from beamtok.testing import assert_items_equal  # noqa: E402

from conftest import CORPUS, TOKENIZER_DIR  # noqa: E402

FILES = [str(CORPUS / f"shakespeare-0{i}.jsonl") for i in range(4)]


def test_every_field_comes_back_as_it_went():
    batch = OneBufferBatch(
        input_ids=torch.arange(24, dtype=torch.int32).reshape(3, 8),
        loss_mask=torch.tensor([[1, 0, 1]], dtype=torch.int8),
        index=torch.tensor([7, 8, 9], dtype=torch.int64),
        labels=np.full((2, 3), -100, dtype=np.int64),
        empty=torch.zeros((0, 4), dtype=torch.float32),
        text=["a", "b"],
        count=3,
    )
    back = pickle.loads(pickle.dumps(batch))
    assert type(back) is OneBufferBatch and list(back) == list(batch)
    for key in ("input_ids", "loss_mask", "index", "empty"):
        assert back[key].dtype == batch[key].dtype and back[key].shape == batch[key].shape
        assert torch.equal(back[key], batch[key])
    assert torch.equal(back["labels"], torch.from_numpy(batch["labels"]))
    assert back["text"] == ["a", "b"] and back["count"] == 3
    assert in_one_buffer((4, {"x": 1}))[1].__class__ is OneBufferBatch and in_one_buffer(5) == 5


def dataset():
    return (
        Dataset.from_files(FILES)
        .tokenize(str(TOKENIZER_DIR))
        .ensure_bos_eos()
        .concat_chunk(64)
        .batch(4, tensors="torch")
    )


def rows_of(batches):
    """Each row of the batches by (shard, index), its fields as numpy (workers read other shards
    in turn, so batches at shard edges differ; the rows may not)."""
    out = {}
    for batch in batches:
        for i in range(len(batch["index"])):
            out[int(batch["shard"][i]), int(batch["index"][i])] = {k: np.asarray(v[i]) for k, v in batch.items()}
    return out


def test_rows_through_workers_are_the_rows_of_one_process():
    alone = rows_of(dataset().iter())
    loader = stateful.StatefulDataLoader(dataset().to_torch(), batch_size=None, num_workers=2)
    batches = list(loader)
    assert batches and all(type(b) is OneBufferBatch for b in batches)
    through = rows_of(batches)
    assert sorted(through) == sorted(alone)
    for key, row in alone.items():
        got = through[key]
        assert list(got) == list(row) and all(got[f].dtype == row[f].dtype and (got[f] == row[f]).all() for f in row), (
            key
        )


def test_a_loader_with_workers_still_resumes_exactly():
    loader = stateful.StatefulDataLoader(dataset().to_torch(), batch_size=None, num_workers=2)
    it = iter(loader)
    list(itertools.islice(it, 5))
    state = loader.state_dict()
    want = [dict(b) for b in itertools.islice(it, 6)]
    resumed = stateful.StatefulDataLoader(dataset().to_torch(), batch_size=None, num_workers=2)
    resumed.load_state_dict(state)
    assert_items_equal([dict(b) for b in itertools.islice(iter(resumed), 6)], want)

"""The end of the data is the end: a state saved after the last batch of a finite dataset
resumes to nothing, through the plain iterator, beamtok's ``StatefulLoader`` (0 and 2
DataLoader workers), ``DistributedLoader`` and ``LightningLoader``; a ``.repeat()`` dataset goes
on into its next epoch. A pass started after the empty one reads the data again, as an epoch
loop expects. Refusals of a state that does not fit are one ``StateError`` in this process."""

from __future__ import annotations

import itertools
import json

import pytest

from beamtok import Dataset
from beamtok._src.base.errors import StateError

from conftest import TOKENIZER_DIR, paragraph_files

pytest.importorskip("torch")
pytest.importorskip("torchdata")

from beamtok._src.distributed.lightning_loader import LightningLoader
from beamtok._src.distributed.torch_loader import DistributedLoader
from beamtok._src.stream.stateful_loader import StatefulLoader


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> str:
    return paragraph_files(tmp_path_factory.mktemp("end"), files=4, per_file=25)


def stream(files: str, seq_len: int = 64) -> Dataset:
    return Dataset.from_files(files).tokenize(str(TOKENIZER_DIR)).ensure_bos_eos().concat_chunk(seq_len).batch(4)


def firsts(batches) -> list[list[int]]:
    return [batch["input_ids"][:, 0].tolist() for batch in batches]


def test_the_plain_iterator_resumes_to_nothing_at_the_end(files):
    it = stream(files).iter()
    read = sum(1 for _ in it)
    assert read > 10
    assert list(stream(files).iter(json.loads(json.dumps(it.state_dict())))) == []


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_loader_resumes_to_nothing_then_a_new_pass_reads_it_all(files, workers):
    loader = StatefulLoader(stream(files).to_torch(), batch_size=None, num_workers=workers)
    whole = firsts(loader)
    state = json.loads(json.dumps(loader.state_dict()))
    resumed = StatefulLoader(stream(files).to_torch(), batch_size=None, num_workers=workers)
    resumed.load_state_dict(state)
    assert firsts(resumed) == []
    assert resumed.state_dict() == state  # still at the end: a checkpoint taken now resumes to nothing too
    assert firsts(resumed) == whole  # the pass after it, as a DataLoader's next epoch


@pytest.mark.parametrize("workers", [0, 2])
def test_distributed_loader_resumes_to_nothing_at_the_end(files, workers):
    loader = DistributedLoader(stream(files), even=None, num_workers=workers)
    assert sum(1 for _ in loader) > 10
    state = loader.state_dict()
    resumed = DistributedLoader(stream(files), even=None, num_workers=workers)
    resumed.load_state_dict(state)
    assert firsts(resumed) == []
    other = DistributedLoader(stream(files), even=None, num_workers=2 - workers)  # another layout: merged states
    other.load_state_dict(state)
    assert firsts(other) == []


def test_lightning_loader_resumes_to_nothing_at_the_end(files):
    loader = LightningLoader(stream(files), num_workers=2)
    assert sum(1 for _ in loader) > 10
    resumed = LightningLoader(stream(files), num_workers=2)
    resumed.load_state_dict(loader.state_dict())
    assert firsts(resumed) == []


@pytest.mark.parametrize("workers", [0, 2])
def test_a_repeated_dataset_goes_on_into_its_next_epoch(files, workers):
    one_pass = sum(1 for _ in stream(files).iter())
    repeated = stream(files).repeat()
    straight = firsts(itertools.islice(DistributedLoader(repeated, even=None, num_workers=workers), one_pass + 5))
    loader = DistributedLoader(repeated, even=None, num_workers=workers)
    assert firsts(itertools.islice(loader, one_pass)) == straight[:one_pass]
    state = loader.state_dict()
    resumed = DistributedLoader(repeated, even=None, num_workers=workers)
    resumed.load_state_dict(state)
    assert firsts(itertools.islice(resumed, 5)) == straight[one_pass:]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_of_another_pipeline_is_refused_in_this_process_before_any_worker(files, workers):
    loader = StatefulLoader(stream(files).to_torch(), batch_size=None, num_workers=workers)
    next(iter(loader))
    state = loader.state_dict()
    other = StatefulLoader(stream(files, seq_len=32).to_torch(), batch_size=None, num_workers=workers)
    with pytest.raises(StateError, match="packing") as refused:
        other.load_state_dict(state)
    assert "\n" not in str(refused.value)
    saved = DistributedLoader(stream(files), even=None, num_workers=workers)
    next(iter(saved))
    for layout in (workers, 2 - workers):  # the same layout (exact), and another (merged states)
        moved = DistributedLoader(stream(files, seq_len=32), even=None, num_workers=layout)
        moved.load_state_dict(saved.state_dict())
        with pytest.raises(StateError, match="packing"):
            iter(moved)
        assert moved._live_iterator is None  # no worker was started

"""DistributedLoader in one process: ``close()`` stops the DataLoader workers at once and keeps
the position, so a loader resumed from ``state_dict()`` afterwards reads on from the next batch."""

from __future__ import annotations

import itertools

import pytest

from beamtok import Dataset

from conftest import CORPUS, TOKENIZER_DIR

pytest.importorskip("torch")
pytest.importorskip("torchdata")

from beamtok._src.distributed.torch_loader import DistributedLoader


def stream() -> Dataset:
    return (
        Dataset.from_files(str(CORPUS / "shakespeare-{00..01}.jsonl"))
        .tokenize(str(TOKENIZER_DIR))
        .ensure_bos_eos()
        .concat_chunk(65)
        .batch(4)
    )


def firsts(batches) -> list[list[int]]:
    return [batch["input_ids"][:, 0].tolist() for batch in batches]


@pytest.mark.parametrize("workers", [0, 2])
def test_close_stops_the_workers_and_keeps_the_position(workers):
    straight = firsts(itertools.islice(DistributedLoader(stream(), even=None, num_workers=workers), 6))
    loader = DistributedLoader(stream(), even=None, num_workers=workers)
    assert firsts(itertools.islice(loader, 3)) == straight[:3]
    running = getattr(loader.loader._iterator, "_workers", [])
    assert len(running) == workers and all(w.is_alive() for w in running)
    loader.close()
    assert not any(w.is_alive() for w in running)
    state = loader.state_dict()
    resumed = DistributedLoader(stream(), even=None, num_workers=workers)
    resumed.load_state_dict(state)
    assert firsts(itertools.islice(resumed, 3)) == straight[3:6]
    loader.close()  # closing again, or a loader that never read, does nothing
    DistributedLoader(stream(), even=None, num_workers=workers).close()

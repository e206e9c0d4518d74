"""Seeks that land exactly on an epoch's first example: ``iter_at()``, ``skip()`` and
``start_example=`` at the first example of epochs 2 and 3 (and one step either side), over a
cache read in order, a global shuffle and a mix, unbatched and batched by sizes that divide an
epoch and that do not. Each must give what reading and dropping gives, and its state resume
there."""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Callable

import pytest

from beamtok import ConfigError, Dataset
from beamtok.testing import tiny_tokenizer

from conftest import real_paragraphs, write_jsonl

pytest.importorskip("apache_beam")
TOKENIZER = tiny_tokenizer()
EPOCHS = 3


@pytest.fixture(scope="module")
def cached(tmp_path_factory) -> Dataset:
    root = tmp_path_factory.mktemp("epochs")
    paras = real_paragraphs(90)
    paths = [
        str(write_jsonl(root / f"p-{i}.jsonl", [{"text": t} for t in paras[i * 30 : (i + 1) * 30]])) for i in range(3)
    ]
    return (
        Dataset.from_files(paths)
        .tokenize(TOKENIZER)
        .ensure_bos_eos()
        .concat_chunk(32)
        .cache(str(root / "cache"), row_group_rows=16)
    )


@pytest.fixture(scope="module")
def epoch(cached) -> int:
    rows = sum(1 for _ in cached)
    assert rows % 4 == 0 and rows % 5 != 0, rows  # batch sizes below: one divides an epoch, one does not
    return rows


def key(item: dict) -> tuple:
    shard, index = item["shard"], item["index"]
    return (tuple(shard.tolist()), tuple(index.tolist())) if hasattr(shard, "tolist") else (int(shard), int(index))


def sources(cached: Dataset) -> dict[str, Callable[[], Dataset]]:
    return {
        "cache in order": lambda: cached.interleave(1).repeat(EPOCHS),
        "global shuffle": lambda: cached.global_shuffle(seed=3).repeat(EPOCHS),
        "mix": lambda: Dataset.mix(
            [cached.interleave(1).repeat(EPOCHS), cached.global_shuffle(seed=1).repeat(EPOCHS)],
            [0.5, 0.5],
            seed=2,
            stop="first_exhausted",
        ),
    }


def epoch_starts(name: str, make: Callable[[], Dataset], epoch: int) -> list[int]:
    """The positions (examples) where an epoch after the first begins: for a mix, where either
    source's next epoch does."""
    if name != "mix":
        return [epoch * e for e in range(1, EPOCHS)]
    seen = [0, 0]
    starts = []
    for position, item in enumerate(make()):
        source = int(item["source"])
        if seen[source] and seen[source] % epoch == 0:
            starts.append(position)
        seen[source] += 1
    assert len(starts) >= 2
    return starts


@pytest.mark.parametrize("batch", [None, 4, 5], ids=["unbatched", "batch_divides_epoch", "batch_does_not"])
# the mix: three sources over many epochs, a whole run a step (make test-fast leaves it out)
@pytest.mark.parametrize("name", ["cache in order", "global shuffle", pytest.param("mix", marks=pytest.mark.slow)])
def test_step_and_skip_at_every_epoch_start(cached, epoch, name, batch):
    make = sources(cached)[name]
    batched = (lambda: make().batch(batch)) if batch else make
    full = [key(x) for x in batched()]
    for start in epoch_starts(name, make, epoch):
        step = start // (batch or 1)  # the step holding the epoch's first example
        for s in sorted({step - 1, step, step + 1} & set(range(len(full)))):
            sought = batched().iter_at(s)
            state = json.loads(json.dumps(sought.state_dict()))
            assert [key(x) for x in sought] == full[s:], f"{name}, batch {batch}: iter_at({s})"
            assert [key(x) for x in batched().iter(state)] == full[s:], f"{name}, batch {batch}: resumed at step {s}"
            for read in (0, 1):
                it = batched().iter()
                head = [key(x) for x in itertools.islice(it, read)]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    it.skip(s - read if s >= read else 0)
                assert head + [key(x) for x in it] == full[:read] + full[max(s, read) :], (
                    f"{name}, batch {batch}: skip to {s}"
                )


@pytest.mark.parametrize("batch", [None, 4, 5])
def test_start_example_at_every_epoch_start_of_a_cache_in_order(cached, epoch, batch):
    make = sources(cached)["cache in order"]
    examples = [key(x) for x in make()]
    for start in (epoch - 1, epoch, epoch + 1, 2 * epoch - 1, 2 * epoch, 2 * epoch + 1):
        ds = make().batch(batch) if batch else make()
        got = list(ds.iter_at(example=start))
        flat = [pair for x in got for pair in (zip(*key(x)) if batch else [key(x)])]
        assert flat == examples[start:], f"start_example={start}, batch {batch}"
        if batch:  # batches begin at the example asked for
            assert len(got) == -(-(len(examples) - start) // batch)


@pytest.mark.parametrize("name", ["global shuffle", "mix"])
def test_start_example_where_positions_are_not_rows_is_refused_in_one_line(cached, name):
    with pytest.raises(ConfigError, match="start_example") as refused:
        sources(cached)[name]().iter_at(example=10)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("batch", [None, 4, 5])
@pytest.mark.parametrize("name", ["cache in order", "global shuffle", "mix"])
def test_the_step_just_past_the_end_is_refused_as_any_later_one(cached, name, batch):
    ds = sources(cached)[name]()
    ds = ds.batch(batch) if batch else ds
    steps = sum(1 for _ in ds)
    for past in (steps, steps + 1, steps + 100):
        with pytest.raises(ConfigError, match=rf"has steps 0-{steps - 1}; step {past} is past its end"):
            ds.iter_at(past)
    last = list(ds.iter_at(steps - 1))
    assert [key(x) for x in last] == [key(x) for x in ds][-1:]


def source_state(state: dict) -> dict:
    """The shard source's place in a state: epoch, position, open shards and turn."""
    part = state["pipeline"]
    while "epoch" not in part:
        (part,) = [value for value in part.values() if isinstance(value, dict)]
    return {name: part[name] for name in ("epoch", "position", "slots", "turn")}


def test_a_seek_leaves_the_state_reading_leaves_at_and_around_epoch_and_shard_edges(cached, epoch):
    make = sources(cached)["cache in order"]
    shards = [int(x["shard"]) for x in itertools.islice(make().iter(), 2 * epoch + 2)]
    edges = [k for k in range(1, len(shards)) if shards[k] != shards[k - 1]]  # shard edges, epoch edges among them
    assert epoch in edges and 2 * epoch in edges
    for k in sorted({0, 1} | {e + d for e in edges for d in (-1, 0, 1)}):
        read = make().iter()
        for _ in itertools.islice(read, k):
            pass
        want = (source_state(read.state_dict()), read.stats()["epoch"])
        sought = make().iter_at(example=k)
        skipped = make().iter()
        skipped.skip(k)
        for how, it in (("start_example", sought), ("skip", skipped)):
            assert (source_state(it.state_dict()), it.stats()["epoch"]) == want, f"{how}={k}"

"""Every node's state has the keys its declared type (``beamtok._src.stream.state``) names: the
required ones always, the optional ones only from the type, and the optional ones the tests
reach (a carry, weights set while training) are seen at least once."""

from __future__ import annotations

import itertools
import typing
from typing import Any

import numpy as np
import pytest

from beamtok import Dataset, StateError
from beamtok._src.stream.iterator import DatasetIterator
from beamtok._src.stream.mixing.reading import MixSource
from beamtok._src.stream.node import Node
from beamtok._src.stream.reading.source import ShardSource
from beamtok._src.stream.state import ShardSourceState
from beamtok._src.stream.timing import TimedNode
from beamtok.testing import tiny_tokenizer

from conftest import CORPUS, cache_without_beam

TOKENIZER = tiny_tokenizer()


def corpus(pattern: str, seq_len: int = 256) -> Dataset:
    return Dataset.from_files(str(CORPUS / pattern)).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(seq_len)


def live_nodes(it: DatasetIterator) -> list[Node]:
    """The iterator's nodes, top to bottom, a mix's sources after it."""
    found: list[Node] = []
    todo: list[Node | None] = [it._root]
    while todo:
        node = todo.pop(0)
        if node is None:
            continue
        while isinstance(node, TimedNode):
            node = node._node
        found.append(node)
        todo.append(node.upstream)
        if isinstance(node, MixSource):
            todo.extend(node.sources)
    return found


def declared_state(cls: type) -> Any:
    """The state type a node class declares: the TypedDict it gives ``Node`` (or a node class
    between them) as its type argument (``RootSource[ShardSourceState]``), else None."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            for arg in typing.get_args(base):
                if typing.is_typeddict(arg):
                    return arg
    return None


def checked(it: DatasetIterator, seen: dict[str, set[str]]) -> None:
    """Check each node's state against the type its class declares; note the keys seen."""
    for node in live_nodes(it):
        declared = declared_state(type(node))
        if declared is None:
            continue
        state = node.state_dict()
        required, optional = set(declared.__required_keys__), set(declared.__optional_keys__)
        assert required <= set(state), f"{type(node).__name__}: lacks {required - set(state)}"
        assert set(state) <= required | optional, (
            f"{type(node).__name__}: undeclared {set(state) - required - optional}"
        )
        seen.setdefault(declared.__name__, set()).update(state)


@pytest.fixture(scope="module")
def cached(tmp_path_factory) -> list[Dataset]:
    where = tmp_path_factory.mktemp("typed")
    return [
        cache_without_beam(corpus("shakespeare-{00..01}.jsonl"), str(where / "a"), row_group_rows=8),
        cache_without_beam(corpus("pydocs-00.jsonl.zst"), str(where / "b"), row_group_rows=8),
    ]


def test_every_node_state_is_its_declared_type(cached):
    seen: dict[str, set[str]] = {}

    # shards, a shuffle window and batches, then a resume on another world size (a carry)
    files = corpus("shakespeare-{00..03}.jsonl").shuffle(16, seed=1).batch(2)
    olds = [files.shard_by_rank(r, 2).iter() for r in range(2)]
    for it in olds:
        list(itertools.islice(it, 3))
        checked(it, seen)
    resumed = files.iter_merged([it.state_dict() for it in olds])
    next(resumed)  # the old states are merged at the first next()
    checked(resumed, seen)

    # a mix read source by source, with weights set while training and counts carried over
    mixed = Dataset.mix([corpus("shakespeare-{00..01}.jsonl"), corpus("pydocs-00.jsonl.zst")], [0.5, 0.5], seed=2)
    it = mixed.iter()
    list(itertools.islice(it, 40))
    it.set_weights([0.8, 0.2])
    list(itertools.islice(it, 5))
    checked(it, seen)

    # a mix of caches split by examples: its sources are read by row number
    seeking = Dataset.mix(cached, [0.5, 0.5], seed=3, block_size=32).shard_by_rank(0, 2, split="examples")
    it = seeking.iter()
    list(itertools.islice(it, 40))
    it.set_weights([0.3, 0.7])
    list(itertools.islice(it, 5))
    checked(it, seen)

    # a global shuffle, read past where a later reader's positions are taken ahead
    it = cached[0].global_shuffle(seed=4, window=40).iter()
    list(itertools.islice(it, 30))
    checked(it, seen)

    assert set(seen) >= {"ShardSourceState", "WindowState", "MixState", "SeekingMixState", "GlobalShuffleState"}, seen
    assert "carry" in seen["ShardSourceState"]
    assert "weight_changes" in seen["MixState"] and "weight_changes" in seen["SeekingMixState"]


def test_a_state_the_type_does_not_name_is_caught(cached, monkeypatch):
    """The check itself: a key the type does not declare fails it."""

    real = ShardSource.state_dict

    def with_extra(self: ShardSource) -> ShardSourceState:
        return {**real(self), "extra": 1}  # type: ignore[typeddict-unknown-key]

    monkeypatch.setattr(ShardSource, "state_dict", with_extra)
    it = corpus("shakespeare-00.jsonl").iter()
    next(it)
    with pytest.raises(AssertionError, match="undeclared"):
        checked(it, {})


def _root_state(state: dict[str, Any]) -> dict[str, Any]:
    node = state["pipeline"]
    while "upstream" in node:
        node = node["upstream"]
    return node


@pytest.mark.parametrize("where", ["shards", "mix", "seeking mix", "global shuffle"])
def test_a_root_reads_exactly_the_keys_its_type_names(cached, where):
    """A root's restore checks the keys its TypedDict names: one more is refused by name, one
    of its required ones missing is refused by name, and the optional ones resume."""
    datasets = {
        "shards": lambda: corpus("shakespeare-{00..01}.jsonl"),
        "mix": lambda: Dataset.mix([corpus("shakespeare-00.jsonl"), corpus("pydocs-00.jsonl.zst")], [0.5, 0.5], seed=2),
        "seeking mix": lambda: Dataset.mix(cached, [0.5, 0.5], seed=3, block_size=32).shard_by_rank(
            0, 1, split="examples"
        ),
        "global shuffle": lambda: cached[0].global_shuffle(seed=4, window=40),
    }
    ds = datasets[where]()
    it = ds.iter()
    list(itertools.islice(it, 12))
    if where in ("shards", "global shuffle"):  # readers merged at uneven places leave a carry, or positions taken
        olds = [ds.shard_by_rank(r, 2).iter() for r in range(2)]
        for old, count in zip(olds, (3, 9)):
            list(itertools.islice(old, count))
        it = ds.iter_merged([old.state_dict() for old in olds])
        next(it)
    if where in ("mix", "seeking mix"):
        it.set_weights([0.7, 0.3])
        next(it)
    state = it.state_dict()
    root = _root_state(state)
    declared = declared_state(dict(zip(datasets, (ShardSource, MixSource, *_roots())))[where])
    assert set(declared.__required_keys__) <= set(root) and set(root) - set(declared.__required_keys__), (
        f"{where}: the test reaches no optional key of {declared.__name__}"
    )
    resumed, rest = list(itertools.islice(ds.iter(state), 20)), list(itertools.islice(it, 20))
    assert len(resumed) == 20 and all(_same(a, b) for a, b in zip(resumed, rest))  # its optional keys resume

    root["surplus"] = 1
    with pytest.raises(StateError, match="surplus"):
        next(ds.iter(state))
    del root["surplus"]
    required = sorted(declared.__required_keys__)[0]
    del root[required]
    with pytest.raises(StateError, match=required):
        next(ds.iter(state))


def _same(a: Any, b: Any) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _roots() -> list[type]:
    from beamtok._src.stream.global_order.shuffle_source import GlobalShuffleSource
    from beamtok._src.stream.mixing.seeking import SeekingMix

    return [SeekingMix, GlobalShuffleSource]

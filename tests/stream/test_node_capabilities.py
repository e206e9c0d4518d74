"""What a live node can do is declared on beamtok._src.stream.node.Node, each capability a method
with a default; the timing wrapper every iterator puts around every node passes each one on."""

from __future__ import annotations

import inspect
import itertools

from beamtok import Dataset
from beamtok._src.stream.node import Node, RootSource, StageNode
from beamtok._src.stream.timing import TimedNode

from conftest import TOKENIZER_DIR, real_paragraphs


def capabilities() -> set[str]:
    return {name for name, member in vars(Node).items() if callable(member) and not name.startswith("_")}


def test_the_timing_wrapper_passes_every_declared_capability_on():
    declared = capabilities()
    assert {
        "can_seek",
        "seek",
        "next_rows",
        "catch_up",
        "check_merge",
        "stage_stats",
        "merge",
        "reset",
        "state_dict",
    } <= declared
    assert declared <= set(vars(TimedNode)), sorted(declared - set(vars(TimedNode)))
    assert not getattr(TimedNode, "__getattr__", None), "forward what is declared, not every attribute"


def test_every_live_node_is_a_node():
    """Stages and root sources inherit the capabilities' defaults rather than being probed for them."""
    import beamtok._src.dataset.dataset  # noqa: F401  (imports every stage and root module)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    nodes = {cls.__name__ for cls in subclasses(Node)}
    assert {
        "ShardSource",
        "MixSource",
        "GlobalShuffleSource",
        "BatchNode",
        "TakeNode",
        "EnumerateNode",
        "WindowShuffleNode",
        "ExampleSplitNode",
        "EvenNode",
    } <= nodes
    assert issubclass(StageNode, Node) and issubclass(RootSource, Node)
    source = inspect.getsource(__import__("beamtok._src.stream.iterator", fromlist=["x"]))
    assert "getattr(self._root" not in source and "getattr(self._source" not in source


def test_a_balanced_stage_s_own_figures_reach_stats_through_the_wrapper():
    ds = Dataset.from_sequence(real_paragraphs(40)).tokenize(str(TOKENIZER_DIR)).concat_chunk(64)
    it = ds.balance_ranks(2, rank=0, world_size=2).iter()
    list(itertools.islice(it, 3))
    assert "balance" in it.stats()


def test_a_cache_read_in_batches_takes_the_column_path_through_the_wrapper(tmp_path, monkeypatch):
    """batch() asks its upstream for next_rows: through the timing wrapper it still gets blocks."""
    from conftest import cache_without_beam, write_jsonl

    files = [
        str(write_jsonl(tmp_path / f"in-{i}.jsonl", [{"text": p} for p in real_paragraphs(20, start=20 * i)]))
        for i in range(2)
    ]
    cached = cache_without_beam(
        Dataset.from_files(files).tokenize(str(TOKENIZER_DIR)).concat_chunk(64), str(tmp_path / "cache")
    )
    asked = []
    real = TimedNode.next_rows
    monkeypatch.setattr(TimedNode, "next_rows", lambda self, limit: asked.append(limit) or real(self, limit))
    batches = list(cached.batch(4))
    assert asked and len(batches) > 1
    assert all(b["input_ids"].shape[1] == 64 for b in batches)

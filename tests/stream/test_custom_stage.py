"""A stream stage written outside beamtok, against ``beamtok.extend`` alone, added with
``Dataset.apply``: it resumes exactly, its options join the fingerprint, and a resume through
it on another world size is refused as for any stage with a position of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from beamtok import ConfigError, Dataset, StateError
from beamtok.extend import Node, Stage, StageNode, StreamContext
from beamtok.testing import check_resumption, tiny_tokenizer

from conftest import CORPUS

TOKENIZER = tiny_tokenizer()
FILES = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "shakespeare-01.jsonl")]


@dataclass(frozen=True)
class EveryNth(Stage):
    """Keeps one example in ``every``, numbering the kept ones."""

    NAME = "every_nth"
    every: int

    def build(self, upstream: Node, context: StreamContext) -> Node:
        return EveryNthNode(upstream, self.every)


class EveryNthNode(StageNode):
    KEYS = ("upstream", "seen")
    NAME = "every_nth"

    def __init__(self, upstream: Node, every: int) -> None:
        super().__init__(upstream)
        self.every = every
        self.seen = 0

    def _restore(self, state: dict[str, Any] | None) -> None:
        self.seen = 0 if state is None else int(state["seen"])

    def _position(self) -> dict[str, Any]:
        return {"seen": self.seen}

    def __next__(self) -> Any:
        while True:
            item = next(self.upstream)
            self.seen += 1
            if self.seen % self.every == 0:
                return {**item, "kept": self.seen // self.every}


def stream(every: int = 3) -> Dataset:
    return Dataset.from_files(FILES).tokenize(TOKENIZER).concat_chunk(64).apply(EveryNth(every)).batch(4)


def test_a_stage_of_ones_own_resumes_exactly_at_every_step():
    report = check_resumption(stream, limit=40)
    assert len(report.steps_checked) >= 10
    kept = [int(k) for batch in stream().take(3).iter() for k in batch["kept"]]
    assert kept == list(range(1, 13))


def test_its_options_are_in_the_fingerprint():
    it = stream(3).iter()
    next(it)
    with pytest.raises(StateError):
        stream(4).iter(it.state_dict())


def test_a_resume_on_another_world_size_is_refused_through_it():
    def ranked(rank: int, world: int) -> Dataset:
        return (
            Dataset.from_files(FILES)
            .tokenize(TOKENIZER)
            .concat_chunk(64)
            .shard_by_rank(rank, world, split="examples")
            .apply(EveryNth(2))
        )

    states = []
    for rank in range(2):
        it = ranked(rank, 2).iter()
        next(it)
        states.append(it.state_dict())
    with pytest.raises(StateError, match="every_nth"):
        ranked(0, 1).iter_merged(states)


def test_apply_takes_only_a_stage():
    with pytest.raises(ConfigError, match=r"beamtok\.extend\.Stage"):
        stream().apply(lambda item: item)  # type: ignore[arg-type]


def test_the_old_iter_calls_work_for_one_release_with_a_warning():
    """``iter(state_dict=)``, ``iter(list)``, ``iter(start_example=)`` and ``iter(step=)`` give
    what ``iter``, ``iter_merged`` and ``iter_at`` give, each with a DeprecationWarning."""
    ds = Dataset.from_files(FILES).tokenize(TOKENIZER).concat_chunk(64).batch(2)
    it = ds.iter()
    next(it)
    state = it.state_dict()
    want = [b["input_ids"].tolist() for b in ds.iter(state).__iter__()][:3]
    with pytest.warns(DeprecationWarning, match=r"iter\(state_dict=\.\.\.\) is now iter\(state\)"):
        got = [b["input_ids"].tolist() for b in ds.iter(state_dict=state)][:3]
    assert got == want
    with pytest.warns(DeprecationWarning, match=r"^iter\(step=N\) is now iter_at\(N\)") as warned:
        at = next(ds.iter(step=1))
    assert warned[0].filename == __file__  # the warning points at the old call
    assert at["input_ids"].tolist() == next(ds.iter_at(1))["input_ids"].tolist() == want[0]
    ranked = [Dataset.from_files(FILES).tokenize(TOKENIZER).concat_chunk(64).shard_by_rank(r, 2) for r in range(2)]
    states = []
    for r in range(2):
        reader = ranked[r].iter()
        next(reader)
        states.append(reader.state_dict())
    whole = Dataset.from_files(FILES).tokenize(TOKENIZER).concat_chunk(64)
    with pytest.warns(DeprecationWarning, match=r"is now iter_merged\(states\)"):
        old = next(whole.iter(states))
    assert old["input_ids"].tolist() == next(whole.iter_merged(states))["input_ids"].tolist()
    with pytest.raises(ConfigError, match="one of a state, start_example and step"):
        ds.iter(state, step=1)

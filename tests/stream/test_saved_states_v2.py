"""States of version 2 saved by the last layout of the package (tests/data/states/v2_*.json,
written by make_v2_states.py at 58e16c0) are the states today's beamtok saves at the same
step (as JSON, all but the fingerprint of where the files were), and resume to the same items, here and on other world sizes."""

from __future__ import annotations

import importlib.util
import itertools
import json

import pytest

from beamtok import StateError
from beamtok._src.stream.state_migration import migrate
from beamtok.testing import assert_items_equal

from conftest import ROOT

STATES = ROOT / "tests" / "data" / "states"
LOCATION = "stream_by_location"  # the stream with files named by absolute path: where the maker's checkout was


def placeless(state: dict) -> dict:
    return {key: value for key, value in state.items() if key != LOCATION}


pytestmark = pytest.mark.filterwarnings("ignore:mix sources make rows of different lengths")


@pytest.fixture
def maker(monkeypatch):
    monkeypatch.chdir(ROOT)  # the states name their files and tokenizer as they were given, from the root
    spec = importlib.util.spec_from_file_location("make_v2_states", STATES / "make_v2_states.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["v2_stages", "v2_mix", "v2_take_pad", "v2_workers"])
def test_a_saved_state_is_the_state_saved_today_and_resumes_alike(maker, name):
    saved = json.loads((STATES / f"{name}.json").read_text())
    make = maker.PIPELINES[name]
    with make().iter() as today:
        list(itertools.islice(today, maker.STEPS))
        now = json.loads(json.dumps(today.state_dict()))
        assert placeless(now) == placeless(migrate(saved))  # the same state, its kinds named and version 3
        with make().iter(saved) as resumed:
            assert_items_equal(list(itertools.islice(resumed, 9)), list(itertools.islice(today, 9)))


@pytest.mark.parametrize("name", ["v2_two_ranks", "v2_two_ranks_even"])
def test_saved_states_of_two_ranks_resume_on_other_world_sizes(maker, name):
    old = json.loads((STATES / f"{name}.json").read_text())
    make_rank = maker.RANKED[name]
    today = []
    for rank in range(2):
        it = make_rank(rank).iter()
        list(itertools.islice(it, 4 + rank))
        today.append(json.loads(json.dumps(it.state_dict())))
    assert [placeless(s) for s in today] == [placeless(migrate(s)) for s in old]
    source = maker.RANKED[name](0)
    for world in (1, 3):
        for rank in range(world):
            ds = (
                source.__class__.from_files(maker.FILES)
                .tokenize(maker.TOKENIZER)
                .ensure_bos_eos()
                .concat_chunk(64)
                .shard_by_rank(rank, world, **({"split": "examples", "even": "pad"} if "even" in name else {}))
                .batch(3)
            )
            assert_items_equal(list(ds.iter_merged(old)), list(ds.iter_merged(today)))


def test_a_version_2_mix_state_gets_its_kind_and_a_state_without_one_is_refused(maker):
    """Version 3 states name each mix's kind; the migration names it for a version-2 state (by
    its keys, the one place that reads them so), and a mix refuses a state that names none."""
    saved = json.loads((STATES / "v2_mix.json").read_text())
    assert saved["beamtok_state"] == 2 and "kind" not in saved["pipeline"]["upstream"]
    migrated = migrate(saved)
    assert migrated["pipeline"]["upstream"]["kind"] == "mix"
    assert [s.get("kind") for s in migrated["pipeline"]["upstream"]["sources"]] == [None] * len(
        saved["pipeline"]["upstream"]["sources"]
    )  # shard sources are read by one node kind only
    it = maker.PIPELINES["v2_mix"]().iter()
    next(it)
    today = it.state_dict()
    assert today["pipeline"]["upstream"]["kind"] == "mix"
    del today["pipeline"]["upstream"]["kind"]
    with pytest.raises(StateError, match="mix: the state's kind is None"):
        next(maker.PIPELINES["v2_mix"]().iter(today))

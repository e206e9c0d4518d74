"""States of version 1, as beamtok saved them (tests/data/states/v1_*.json, written by
make_v1_states.py at the last commit saving version 1), resume with today's beamtok exactly
as states it saves itself: one migration function (beamtok._src.stream.state_migration) turns them
into version 2, and nothing else reads the old form."""

from __future__ import annotations

import copy
import itertools
import json

import pytest

from beamtok import Dataset, StateError
from beamtok._src.stream.explain import explain_state
from beamtok._src.stream.state_migration import migrate
from beamtok.extend import STATE_VERSION
from beamtok.testing import assert_items_equal

from conftest import ROOT

STATES = ROOT / "tests" / "data" / "states"
pytestmark = pytest.mark.filterwarnings("ignore:mix sources make rows of different lengths")


def load_maker():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_v1_states", STATES / "make_v1_states.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def maker(monkeypatch):
    monkeypatch.chdir(ROOT)  # the states name their files and tokenizer as they were given, from the root
    return load_maker()


@pytest.mark.parametrize("name", ["v1_stages", "v1_mix"])
def test_a_version_1_state_resumes_as_a_state_saved_today(maker, name):
    saved = json.loads((STATES / f"{name}.json").read_text())
    assert saved["beamtok_state"] == 1 and "plan" in saved
    untouched = copy.deepcopy(saved)
    make = maker.PIPELINES[name]
    resumed = make().iter(saved)
    assert saved == untouched  # the caller's state is never changed
    today = make().iter()
    list(itertools.islice(today, 7))
    now = today.state_dict()
    assert now["beamtok_state"] == STATE_VERSION == 3
    assert migrate(saved)["plan"] == now["plan"] and migrate(saved)["pipeline"] == now["pipeline"]
    assert_items_equal(list(itertools.islice(resumed, 12)), list(itertools.islice(today, 12)))
    assert resumed.state_dict()["beamtok_state"] == 3
    lines = explain_state(saved)
    assert lines[0].startswith("beamtok state format 1 (read as version 3)")
    assert lines[1:] == explain_state(now)[1:]


def test_version_1_states_of_two_ranks_resume_on_other_world_sizes_as_today_s_do(maker):
    old = json.loads((STATES / "v1_two_ranks.json").read_text())
    assert [s["beamtok_state"] for s in old] == [1, 1]
    made_today = []
    for rank in range(2):
        it = maker.packed().shard_by_rank(rank, 2).batch(3).iter()
        list(itertools.islice(it, 4 + rank))
        made_today.append(it.state_dict())
    for world in (1, 3):
        for rank in range(world):
            ds = maker.packed().shard_by_rank(rank, world).batch(3)
            assert_items_equal(list(ds.iter_merged(old)), list(ds.iter_merged(made_today)))


def test_a_state_saved_before_plans_gets_its_plan_from_about():
    earlier = json.loads((STATES / "before_plans.json").read_text())
    migrated = migrate(earlier)
    assert migrated["beamtok_state"] == 3 and migrated["plan"]["from_about"] and "plan" not in earlier
    assert [s["stage"] for s in migrated["plan"]["stages"]] == ["shuffle", "take", "batch", "enumerate"]


def test_the_current_version_passes_through_and_others_are_refused():
    state = {"beamtok_state": 3, "plan": {}}
    assert migrate(state) is state
    with pytest.raises(StateError, match=r"format version 0 is not supported \(this beamtok reads versions 1, 2, 3\)"):
        migrate({"beamtok_state": 0})
    with pytest.raises(StateError, match="neither a plan nor an about"):
        migrate({"beamtok_state": 1, "pipeline": {}})


def test_nothing_but_the_migration_reads_about_or_guesses_a_kind():
    """The old form is read in one place: no other module parses stage labels from about."""
    sources = {p: p.read_text() for p in (ROOT / "beamtok").rglob("*.py")}
    parsing = [str(p.relative_to(ROOT)) for p, text in sources.items() if 'startswith("stage ")' in text]
    assert parsing == ["beamtok/_src/stream/state_migration.py"], parsing


def test_a_migrated_state_is_what_dataset_iter_accepts(maker):
    saved = json.loads((STATES / "v1_stages.json").read_text())
    with pytest.raises(StateError, match="changed since the state was saved"):
        Dataset.from_files(maker.FILES).tokenize(maker.TOKENIZER).ensure_bos_eos().concat_chunk(64).batch(4).iter(saved)

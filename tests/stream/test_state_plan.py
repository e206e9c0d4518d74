"""A state keeps its pipeline's plan as data (beamtok._src.stream.stream_plan): the root's kind, options
and packing and every stage's options, whole and versioned. Code reads the plan; ``about`` is
for people, read only to turn a state saved before plans into one."""

from __future__ import annotations

import itertools
import json

import pytest

from beamtok import Dataset, StateError
from beamtok._src.stream.explain import explain_state
from beamtok._src.stream.stream_plan import PLAN_VERSION
from beamtok.testing import assert_items_equal

from conftest import CORPUS, ROOT, TOKENIZER_DIR, real_paragraphs

FILES = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]
LONG_SCHEDULE = [(i * 1000, 32 * 2 ** (i % 2)) for i in range(20)]  # a stage whose JSON is long


def packed() -> Dataset:
    return Dataset.from_files(FILES).tokenize(str(TOKENIZER_DIR)).ensure_bos_eos().concat_chunk(64)


def saved(ds: Dataset, items: int = 3) -> dict:
    it = ds.iter()
    list(itertools.islice(it, items))
    return json.loads(json.dumps(it.state_dict()))


def test_the_plan_holds_every_stage_whole():
    ds = packed().interleave(2).shuffle(window=8, seed=3).batch_tokens(256, window=16, max_len=LONG_SCHEDULE)
    plan = saved(ds)["plan"]
    assert plan["version"] == PLAN_VERSION
    assert plan["root"]["kind"] == "shard source" and plan["root"]["options"]["interleave"] == 2
    assert plan["root"]["packing"]["mode"] == "concat" and plan["root"]["packing"]["seq_len"] == 64
    assert [s["stage"] for s in plan["stages"]] == ["shuffle", "batch_tokens"]
    assert plan["stages"][1]["max_len"] == [list(p) for p in LONG_SCHEDULE]  # whole, though its JSON is long
    about = saved(ds)["about"]
    assert "shard list" in about and not any(
        name.startswith("stage ") for name in about
    )  # the data, for people; stages are in the plan


def test_a_mix_plan_names_each_source_s_packing():
    mix = Dataset.mix([packed(), Dataset.from_files(FILES).tokenize(str(TOKENIZER_DIR)).pad(32)], [0.5, 0.5], seed=0)
    plan = saved(mix)["plan"]
    assert plan["root"]["kind"] == "mix" and [s["packing"]["mode"] for _, s in plan["root"]["sources"]] == [
        "concat",
        "pad",
    ]
    lines = explain_state(saved(mix))
    assert (
        "packing (mix source 0): concat_chunk, rows of 64 tokens" in lines
        and "packing (mix source 1): pad, rows of 32 tokens" in lines
    )


def test_a_resume_under_another_batch_size_reads_the_plan():
    state = saved(packed().batch(8), 2)
    del state["about"]  # code never needs it
    resumed = packed().batch(16).iter(state)
    rows = next(resumed)["index"]
    expected = list(itertools.islice(packed().iter(), 16, 32))
    assert list(rows) == [int(e["index"]) for e in expected]


def earlier_pipeline(batch: int = 2) -> Dataset:
    """The pipeline tests/data/states/before_plans.json was saved by (a version before plans,
    3 items in, run from the repository: a spec names its tokenizer as it was given)."""
    texts = real_paragraphs(60)
    return (
        Dataset.from_sequence(texts, shards=3)
        .tokenize("data/tokenizers/gpt2")
        .ensure_bos_eos()
        .concat_chunk(64)
        .shuffle(window=8, seed=0)
        .take(40)
        .batch(batch)
        .enumerate()
    )


def test_a_state_saved_before_plans_resumes_and_explains_as_a_new_one(monkeypatch):
    monkeypatch.chdir(ROOT)
    earlier = json.loads((ROOT / "tests" / "data" / "states" / "before_plans.json").read_text())
    assert "plan" not in earlier and "stage 4 (enumerate)" in earlier["about"]
    resumed = list(earlier_pipeline().iter(earlier))
    uninterrupted = list(earlier_pipeline())[3:]
    assert [i for i, _ in resumed] == [i for i, _ in uninterrupted]
    assert all((a[1]["input_ids"] == b[1]["input_ids"]).all() for a, b in zip(resumed, uninterrupted))
    now = saved(earlier_pipeline(), 3)
    assert explain_state(earlier)[1:] == explain_state(now)[1:]  # the first line names the fingerprints
    assert any(line.startswith("stage 4 (enumerate): the next number is 3") for line in explain_state(earlier))
    first = next(earlier_pipeline(batch=4).iter(earlier))  # its batch size read back from about, turned into a plan
    assert first[0] == 3 and (first[1]["input_ids"][:2] == uninterrupted[0][1]["input_ids"]).all()


def test_a_refusal_names_the_change_inside_a_long_stage():
    state = saved(packed().batch_tokens(256, window=16, max_len=LONG_SCHEDULE))
    other = [(start, 32) for start, _ in LONG_SCHEDULE]
    with pytest.raises(StateError, match=r"stage 1 \(batch_tokens\): max_len \[\[0, 32\], \[1000, 64\]"):
        packed().batch_tokens(256, window=16, max_len=other).iter(state)


def test_a_plan_of_another_version_is_refused_by_name():
    state = saved(packed().batch(4))
    state["plan"]["version"] = 99
    with pytest.raises(StateError, match="not a version-2 plan"):
        packed().batch(8).iter(state)


def test_a_version_1_plan_of_a_mix_still_loads_and_explains():
    """Version 1 kept a mix's sources as a list of plans; version 2 keeps runs of equal ones."""
    mix = lambda: Dataset.mix(  # noqa: E731
        [packed(), packed(), Dataset.from_files(FILES).tokenize(str(TOKENIZER_DIR)).pad(32)], seed=0
    ).batch(2)
    state = saved(mix())
    runs = state["plan"]["root"]["sources"]
    assert [count for count, _ in runs] == [2, 1]
    state["beamtok_state"] = state["plan"]["version"] = 1  # a version-1 state, as beamtok saved them then
    state["plan"]["root"]["sources"] = [plan for count, plan in runs for _ in range(count)]
    want = list(itertools.islice(mix().iter(saved(mix())), 5))
    assert_items_equal(list(itertools.islice(mix().iter(state), 5)), want)
    lines = explain_state(state)
    assert (
        "packing (mix source 1): concat_chunk, rows of 64 tokens" in lines
        and "packing (mix source 2): pad, rows of 32 tokens" in lines
    )


def test_the_kinds_table_holds_every_stage_and_root():
    """A plan names its stages and root; beamtok._src.stream.kinds is the one table they are found
    in again. Every Stage and RootPlan subclass in the package must be in it."""
    import importlib
    import pkgutil

    import beamtok._src.stream
    from beamtok._src.stream.kinds import ROOTS, STAGES
    from beamtok._src.stream.node import Stage
    from beamtok._src.stream.roots.base import RootPlan

    for info in pkgutil.walk_packages(beamtok._src.stream.__path__, "beamtok._src.stream."):
        importlib.import_module(info.name)

    def every(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from every(sub)

    def ours(cls: type) -> bool:  # stages users write (Dataset.apply) are not in the table
        return cls.__module__.startswith("beamtok.")

    assert {c for c in every(Stage) if "NAME" in c.__dict__ and ours(c)} == set(STAGES.values())
    assert {c for c in every(RootPlan) if "KIND" in c.__dict__ and ours(c)} == set(ROOTS.values())
    assert all(STAGES[c.NAME] is c for c in STAGES.values()) and all(ROOTS[c.KIND] is c for c in ROOTS.values())

"""The stream: every stage resumes exactly (check_resumption), states are strict and small."""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter

import numpy as np
import pytest

from beamtok import ConfigError, Dataset, StateError
from beamtok._src.stream.describe import _hash
from beamtok.testing import assert_items_equal, check_resumption, items_equal


@pytest.fixture
def shards(make_shards):
    return make_shards(4, docs_per_shard=6)


def base(paths, tokenizer_dir, seq_len=32):
    return Dataset.from_files(paths).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(seq_len)


def test_source_resumes_at_every_step(shards, tokenizer_dir):
    report = check_resumption(lambda: base(shards, tokenizer_dir))
    assert report.total_items > 20 and len(report.steps_checked) == report.total_items + 1


def test_interleave_and_shard_shuffle_resume_at_every_step(shards, tokenizer_dir):
    make = lambda: base(shards, tokenizer_dir).shuffle_shards(seed=3).interleave(3).repeat(2)  # noqa: E731
    items = list(make())
    assert len({e["shard"] for e in items[:3]}) == 3  # three shards open at once
    check_resumption(make)


def test_shuffle_resumes_at_every_step(shards, tokenizer_dir):
    make = lambda: base(shards, tokenizer_dir).shuffle(window=7, seed=5)  # noqa: E731
    shuffled = [(e["shard"], e["index"]) for e in make()]
    plain = [(e["shard"], e["index"]) for e in base(shards, tokenizer_dir)]
    assert shuffled != plain and sorted(shuffled) == sorted(plain)
    check_resumption(make)


@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_resumes_at_every_step(shards, tokenizer_dir, drop_last):
    check_resumption(lambda: base(shards, tokenizer_dir).batch(5, drop_last=drop_last))


def test_take_and_enumerate_resume_at_every_step(shards, tokenizer_dir):
    make = lambda: base(shards, tokenizer_dir).enumerate(start=1).take(11)  # noqa: E731
    items = list(make())
    assert [i for i, _ in items] == list(range(1, 12))
    check_resumption(make)


@pytest.mark.parametrize("pack", ["pad", "window", "none"])
def test_other_packings_resume(shards, tokenizer_dir, pack):
    ds = Dataset.from_files(shards).tokenize(tokenizer_dir)
    ds = {"pad": ds.pad(24), "window": ds.sliding_window(24, stride=8), "none": ds}[pack]
    check_resumption(lambda: ds.shuffle(5, seed=1).batch(3))


def test_full_pipeline_across_epochs_with_ranks(make_shards, tokenizer_dir):
    """files -> tokenize -> ensure_bos_eos -> concat_chunk -> shuffle -> batch, 2 epochs, 2 ranks."""
    paths = make_shards(6, docs_per_shard=8, compression=None)

    def make(rank):
        return lambda: (
            base(paths, tokenizer_dir, seq_len=40)
            .shuffle_shards(seed=11)
            .interleave(2)
            .repeat(2)
            .shard_by_rank(rank, 2)
            .shuffle(window=9, seed=2)
            .batch(4)
        )

    per_rank = [list(make(r)()) for r in range(2)]
    for rank in range(2):
        report = check_resumption(make(rank), random_steps=12, seed=rank)
        assert report.max_state_bytes < 4096
    keys = [(s, i) for batches in per_rank for b in batches for s, i in zip(b["shard"].tolist(), b["index"].tolist())]
    one_epoch = {(e["shard"], e["index"]) for e in base(paths, tokenizer_dir, seq_len=40)}
    # each epoch, the ranks split the shards between them: every example is read once per epoch
    assert Counter(keys) == {key: 2 for key in one_epoch}


def test_ranks_split_shards_disjointly_within_an_epoch(make_shards, tokenizer_dir):
    paths = make_shards(6, docs_per_shard=4)
    seen = [
        {e["shard"] for e in base(paths, tokenizer_dir).shuffle_shards(seed=1).shard_by_rank(r, 3)} for r in range(3)
    ]
    assert all(len(s) == 2 for s in seen) and set().union(*seen) == set(range(6))


def test_example_split_for_few_shards(make_shards, tokenizer_dir):
    (path,) = make_shards(1, docs_per_shard=10)
    by_ranges = [list(base([path], tokenizer_dir).shard_by_rank(r, 2)) for r in range(2)]  # the file is cut into ranges
    assert (
        by_ranges[0]
        and by_ranges[1]
        and {e["shard"] for e in by_ranges[0]}.isdisjoint({e["shard"] for e in by_ranges[1]})
    )
    full = list(base([path], tokenizer_dir))
    parts = [list(base([path], tokenizer_dir).shard_by_rank(r, 2, split="examples")) for r in range(2)]
    assert all(items_equal(a, b) for a, b in zip(parts[0], full[0::2]))
    assert all(items_equal(a, b) for a, b in zip(parts[1], full[1::2]))
    check_resumption(lambda: base([path], tokenizer_dir).shard_by_rank(1, 2, split="examples"))


def test_in_memory_sources_resume(paragraphs, tokenizer_dir):
    texts = paragraphs(40)
    check_resumption(lambda: Dataset.from_sequence(texts, shards=3).tokenize(tokenizer_dir).concat_chunk(30).batch(2))
    check_resumption(lambda: Dataset.from_iterable(lambda: iter(texts)).tokenize(tokenizer_dir).pad(16))
    with pytest.raises(ConfigError, match="one-shot iterator"):
        Dataset.from_iterable(iter(texts))


def test_hf_dataset_source(paragraphs, tokenizer_dir):
    datasets = pytest.importorskip("datasets")
    hf = datasets.Dataset.from_dict({"text": paragraphs(30)})
    from_hf = list(Dataset.from_hf(hf, shards=2).tokenize(tokenizer_dir).concat_chunk(20))
    from_list = list(Dataset.from_sequence(paragraphs(30), shards=2).tokenize(tokenizer_dir).concat_chunk(20))
    assert all(items_equal(a, b) for a, b in zip(from_hf, from_list)) and len(from_hf) == len(from_list)


def test_state_is_small_and_does_not_grow(tmp_path, tokenizer_dir, paragraphs):
    sizes = {}
    texts = paragraphs(400)
    for seq_len in (16, 512):
        ds = (
            Dataset.from_sequence(texts, shards=4)
            .tokenize(tokenizer_dir)
            .concat_chunk(seq_len)
            .shuffle(64, seed=0)
            .batch(2)
        )
        it = ds.iter()
        for step in (1, 10, 40):
            for _ in itertools.islice(it, step):
                pass
            sizes[(seq_len, step)] = len(json.dumps(it.state_dict()))
    # one open shard's cursor, a window position, counters, and the parts of the pipeline
    # (short ones as values, for refusals that say old → new): about 1.2 KB, never growing
    assert max(sizes.values()) < 1500, sizes
    assert max(sizes.values()) - min(sizes.values()) < 100, sizes


def test_restore_rejects_other_specs_versions_and_keys(shards, tokenizer_dir):
    ds = base(shards, tokenizer_dir).batch(2)
    it = ds.iter()
    next(it)
    state = it.state_dict()
    pristine = copy.deepcopy(state)
    # a refusal names the part that changed: old → new where the state kept the old value
    with pytest.raises(StateError, match=r"spec fingerprint .*: packing: seq_len 32 → 33$"):
        base(shards, tokenizer_dir, seq_len=33).batch(2).iter(state)
    base(shards, tokenizer_dir).batch(3).iter(state)  # another batch size resumes (a state is at a batch boundary)
    with pytest.raises(StateError, match=r"stream fingerprint .*: stage 2 \(take\) added \(now count=9\)$"):
        base(shards, tokenizer_dir).batch(2).take(9).iter(state)
    with pytest.raises(StateError, match=r"changed since the state was saved: shard list: 4 shards, .* → 3 shards"):
        base(shards[:3], tokenizer_dir).batch(2).iter(state)
    with pytest.raises(
        StateError,
        match=r"shuffle_shards seed: null → 4; stage 1 \(shuffle\) added \(now window=4, seed=1\); .*stage 1 \(batch\) removed",
    ):
        base(shards, tokenizer_dir).shuffle_shards(4).shuffle(4, seed=1).batch(2).iter(state)
    earlier = {  # states of an earlier beamtok: version 1, no plan, every part hashed
        **{k: v for k, v in state.items() if k != "plan"},
        "beamtok_state": 1,
    }
    hashed = {**earlier, "about": {name: _hash(value) for name, value in ds.pipeline.parts().items()}}
    with pytest.raises(StateError, match=r"spec fingerprint .*: packing \(now mode=\"concat\", seq_len=33"):
        base(shards, tokenizer_dir, seq_len=33).batch(2).iter(hashed)
    with pytest.raises(StateError, match=r"changed since the state was saved: step 1 \(tokenize\) \(now tokenizer="):
        Dataset.from_files(shards).tokenize(tokenizer_dir, add_special_tokens=False).ensure_bos_eos().concat_chunk(
            32
        ).batch(2).iter(state)
    old_format = {k: v for k, v in state.items() if k != "about"}  # states saved before 'about' still resume
    assert_items_equal([next(ds.iter(old_format))], [next(ds.iter(state))])
    with pytest.raises(StateError, match=r"format version 99 is not supported .*reads versions 1, 2"):
        ds.iter({**state, "beamtok_state": 99})
    with pytest.raises(StateError, match=r"lacks keys \['plan'\]"):  # a version-2 state always holds its plan
        ds.iter({k: v for k, v in state.items() if k != "plan"})
    with pytest.raises(StateError, match="not a beamtok state"):
        ds.iter({"pipeline": {}})
    with pytest.raises(StateError, match=r"has keys it does not know \['extra'\]"):
        ds.iter({**state, "extra": 1})
    bad = copy.deepcopy(state)
    bad["pipeline"]["upstream"]["slots"][0]["shard"] = 99
    with pytest.raises(StateError, match="shard 99 does not exist"):
        ds.iter(bad)
    bad = copy.deepcopy(state)
    bad["pipeline"]["upstream"]["slots"][0]["cursor"]["token"] = -4
    with pytest.raises(StateError, match="non-negative"):
        ds.iter(bad)
    assert state == pristine


def test_state_of_another_rank_is_refused(make_shards, tokenizer_dir):
    paths = make_shards(2, docs_per_shard=4)
    it = base(paths, tokenizer_dir).shard_by_rank(0, 2).iter()
    next(it)
    with pytest.raises(StateError, match="belongs to reader"):
        base(paths, tokenizer_dir).shard_by_rank(1, 2).iter(it.state_dict())


def test_stage_order_is_enforced(shards, tokenizer_dir):
    ds = Dataset.from_files(shards)
    with pytest.raises(ConfigError, match="call tokenize"):
        ds.concat_chunk(8)
    with pytest.raises(ConfigError, match="call tokenize"):
        ds.ensure_bos_eos()
    with pytest.raises(ConfigError, match="per-shard stage"):
        ds.tokenize(tokenizer_dir).shuffle(4).concat_chunk(8)
    with pytest.raises(ConfigError, match="before the packing stage"):
        ds.tokenize(tokenizer_dir).concat_chunk(8).map(lambda r: r)
    with pytest.raises(ConfigError, match="seq_len must be an integer >= 1"):
        ds.tokenize(tokenizer_dir).concat_chunk(0)


def test_stats_account_for_documents(tmp_path, tokenizer_dir, paragraphs):
    from conftest import write_jsonl

    lines = [{"text": t} for t in paragraphs(10)] + ["{oops", {"text": ""}]
    path = str(write_jsonl(tmp_path / "s.jsonl", lines))
    it = (
        Dataset.from_files(path, on_error="skip")
        .tokenize(tokenizer_dir)
        .filter_length(min_tokens=5)
        .concat_chunk(16)
        .iter()
    )
    examples = list(it)
    stats = it.stats()
    docs = stats["documents"]
    assert docs["read"] == 12 == docs["emitted"] + sum(docs["skipped"].values())
    assert docs["skipped"]["malformed_json"] == 1 and docs["skipped"]["empty"] == 1
    assert stats["examples"] == len(examples)
    assert stats["tokens"] + stats["pad_tokens"] == 16 * len(examples)


def test_map_and_filter_are_per_document_steps(shards, tokenizer_dir):
    ds = (
        Dataset.from_files(shards)
        .filter(lambda r: not r["text"].isupper(), name="not-shouting")
        .map(lambda r: {"text": r["text"].lower()}, name="lower")
        .tokenize(tokenizer_dir)
    )
    it = ds.iter()
    rows = list(it)
    assert it.stats()["documents"]["skipped"].get("filtered", 0) > 0
    assert all(r["input_ids"].dtype == np.int32 for r in rows)
    check_resumption(lambda: ds.concat_chunk(20).batch(2))


def test_tiktoken_backend_stream_equals_hf_and_shares_states(shards, tokenizer_dir):
    pytest.importorskip("tiktoken")
    fast = lambda: (  # noqa: E731
        Dataset.from_files(shards).tokenize(tokenizer_dir, engine="exact").ensure_bos_eos().concat_chunk(32).batch(2)
    )
    hf = lambda: base(shards, tokenizer_dir).batch(2)  # noqa: E731
    assert fast().spec_fingerprint == hf().spec_fingerprint
    check_resumption(fast, random_steps=5, resume_dataset=hf)


def test_a_state_passed_as_json_text_says_to_parse_it(shards, tokenizer_dir):
    ds = base(shards, tokenizer_dir)
    it = ds.iter()
    next(it)
    text = json.dumps(it.state_dict())
    with pytest.raises(StateError, match=r"JSON string, not a dict: pass json.loads"):
        ds.iter(text)
    assert next(ds.iter(json.loads(text)))["index"] == next(it)["index"]


def test_stats_say_what_was_delivered_apart_from_what_was_read_ahead(shards, tokenizer_dir):
    ds = (
        Dataset.from_files(shards)
        .tokenize(tokenizer_dir)
        .ensure_bos_eos()
        .concat_chunk(32)
        .shuffle(16, seed=0)
        .batch(4)
    )
    it = ds.iter()
    first = next(it)
    stats = it.stats()
    assert stats["delivered"] == {
        "items": 1,
        "examples": 4,
        "tokens": int((first["segment_ids"] > 0).sum()),
        "pad_tokens": int((first["segment_ids"] == 0).sum()),
    }
    assert stats["examples"] == 16  # the shuffle window read ahead
    rest = list(it)
    delivered = it.stats()["delivered"]
    assert delivered["items"] == 1 + len(rest) and delivered["examples"] == it.stats()["examples"]
    assert delivered["tokens"] == it.stats()["tokens"] and delivered["pad_tokens"] == it.stats()["pad_tokens"]
    resumed = ds.iter({**it.state_dict(), "delivered": {"items": 1, "examples": 4, "tokens": 5, "pad_tokens": 0}})
    assert resumed.stats()["delivered"]["tokens"] == 5  # carried by the state, not recounted
    with pytest.raises(StateError, match=r"delivered: tokens must be an integer >= 0"):
        ds.iter({**it.state_dict(), "delivered": {"items": 1, "examples": 4, "tokens": -5, "pad_tokens": 0}})


def test_delivered_counts_the_batches_inside_enumerate_pairs(shards, tokenizer_dir):
    ds = Dataset.from_files(shards).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(32).batch(4).enumerate()
    it = ds.iter()
    items = list(it)
    delivered = it.stats()["delivered"]
    assert delivered["items"] == len(items) and delivered["examples"] == it.stats()["examples"] > 0
    assert (
        delivered["tokens"] == sum(int((batch["segment_ids"] > 0).sum()) for _, batch in items) == it.stats()["tokens"]
    )


@pytest.mark.parametrize(("before", "after"), [(8, 5), (4, 12), (6, 6)])
def test_a_state_resumes_under_another_batch_size_at_the_next_example(shards, tokenizer_dir, before, after):
    def ds(size: int) -> Dataset:
        return (
            Dataset.from_files(shards)
            .tokenize(tokenizer_dir)
            .ensure_bos_eos()
            .concat_chunk(32)
            .shuffle(16, seed=0)
            .batch(size)
            .enumerate()
        )

    examples = [(int(s), int(i)) for _, batch in ds(1) for s, i in zip(batch["shard"], batch["index"])]
    it = ds(before).iter()
    for _ in range(3):
        next(it)
    state = json.loads(json.dumps(it.state_dict()))
    resumed = list(ds(after).iter(state))
    got = [(int(s), int(i)) for _, batch in resumed for s, i in zip(batch["shard"], batch["index"])]
    assert got == examples[3 * before :]  # the next example on, in the uninterrupted order
    assert (
        all(len(batch["index"]) == after for _, batch in resumed[:-1]) and resumed[0][0] == 3
    )  # enumerate() goes on counting


def test_a_batch_size_change_is_refused_where_a_later_stage_holds_batches(shards, tokenizer_dir):
    def ds(size: int) -> Dataset:
        return (
            Dataset.from_files(shards)
            .tokenize(tokenizer_dir)
            .ensure_bos_eos()
            .concat_chunk(32)
            .batch(size)
            .shuffle(4, seed=0)
        )

    it = ds(4).iter()
    next(it)
    with pytest.raises(StateError, match=r"stage 1 \(batch\): size 4 → 8"):
        ds(8).iter(it.state_dict())

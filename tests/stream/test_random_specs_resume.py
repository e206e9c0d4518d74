"""Property tests: random corpora x random specs x random interruption points.

Random documents (empty, short, long; Unicode with combining marks, astral characters and
lone surrogates) with bad records mixed in, under random packing specs. Properties:
every document is accounted for, resume at any point is exact, and the Beam cache yields the
on-the-fly stream. ``HYPOTHESIS_PROFILE=long`` runs many more cases than CI's default.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamtok import Dataset
from beamtok.testing import assert_items_equal, check_resumption

settings.register_profile("ci", max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

TOKENIZER = str(Path(__file__).resolve().parents[2] / "data" / "tokenizers" / "gpt2")

# Letters, digits, spaces, punctuation, combining marks, CJK, emoji and lone surrogates.
UNICODE = st.characters(codec=None, categories=["L", "N", "Zs", "P", "Mn", "Mc", "So", "Cs"])
WORDS = st.sampled_from(["the ", "king ", "naïve ", "café ", "東京 ", "🙂 ", "e\u0301 ", "\n", "Ω "])

text = st.one_of(
    st.just(""),
    st.text(UNICODE, max_size=40),
    st.lists(WORDS, max_size=400).map("".join),
    st.integers(1_000, 20_000).map(lambda n: "All the world's a stage. " * (n // 25)),  # long
)

BAD_RECORDS = {
    "malformed_json": '{"text": "cut',
    "not_an_object": "[1, 2]",
    "missing_field": '{"body": "x"}',
    "wrong_type": '{"text": 7}',
    "invalid_utf8": b'{"text": "\xff"}',
}

record = st.one_of(
    text.map(lambda t: ("good", t)),
    st.sampled_from(sorted(BAD_RECORDS)).map(lambda reason: ("bad", reason)),
)

corpus = st.lists(st.lists(record, min_size=0, max_size=12), min_size=1, max_size=3)

spec = st.fixed_dictionaries(
    {
        "seq_len": st.integers(1, 48),
        "pack": st.sampled_from(["concat", "pad", "window"]),
        "bos_eos": st.booleans(),
        "interleave": st.integers(1, 2),
        "shuffle": st.one_of(st.none(), st.integers(1, 5)),
        "batch": st.one_of(st.none(), st.integers(1, 3)),
    }
)


def write_corpus(root: Path, shards: list[list[tuple[str, str]]]) -> tuple[list[str], dict[str, int]]:
    """Write the shards as JSONL; return the paths and the skip counts the run must report."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    expected: dict[str, int] = {}
    for i, records in enumerate(shards):
        lines = []
        for kind, value in records:
            if kind == "bad":
                expected[value] = expected.get(value, 0) + 1
                raw = BAD_RECORDS[value]
                lines.append(raw if isinstance(raw, bytes) else raw.encode())
            else:
                lines.append(json.dumps({"text": value}).encode())
                if _has_lone_surrogate(value):
                    expected["invalid_utf8"] = expected.get("invalid_utf8", 0) + 1
        path = root / f"shard-{i}.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        paths.append(str(path))
    return paths, expected


def _has_lone_surrogate(value: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in value)


def build(paths: list[str], s: dict[str, Any], stream: bool = True) -> Dataset:
    ds = Dataset.from_files(paths, on_error="skip").tokenize(TOKENIZER)
    if s["bos_eos"]:
        ds = ds.ensure_bos_eos()
    if s["pack"] == "concat":
        ds = ds.concat_chunk(s["seq_len"])
    elif s["pack"] == "pad":
        ds = ds.pad(s["seq_len"])
    else:
        ds = ds.sliding_window(s["seq_len"], stride=max(1, s["seq_len"] // 2))
    ds = ds.interleave(s["interleave"])
    if not stream:
        return ds
    if s["shuffle"]:
        ds = ds.shuffle(s["shuffle"], seed=3)
    if s["batch"]:
        ds = ds.batch(s["batch"])
    return ds


@given(shards=corpus, s=spec, cut=st.floats(0, 1))
def test_accounting_holds_and_resume_is_exact(tmp_path_factory, shards, s, cut):
    paths, expected_skips = write_corpus(tmp_path_factory.mktemp("prop"), shards)
    it = build(paths, s).iter()
    items = list(it)
    documents = it.stats()["documents"]
    assert documents["read"] == sum(len(r) for r in shards)
    assert documents["read"] == documents["emitted"] + sum(documents["skipped"].values())
    skipped = dict(documents["skipped"])
    empty = skipped.pop("empty", 0)  # texts that tokenize to nothing (and no BOS/EOS)
    assert skipped == expected_skips
    assert documents["emitted"] + empty == clean_documents(shards)
    check_resumption(lambda: build(paths, s), steps=[int(cut * len(items))])


def clean_documents(shards: list[list[tuple[str, str]]]) -> int:
    return sum(1 for records in shards for kind, value in records if kind == "good" and not _has_lone_surrogate(value))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@settings(max_examples=4 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else 40)
@given(shards=corpus, s=spec, cut=st.floats(0, 1))
def test_cache_equals_on_the_fly_and_states_cross(tmp_path_factory, shards, s, cut):
    pytest.importorskip("apache_beam")
    root = tmp_path_factory.mktemp("propcache")
    paths, _ = write_corpus(root / "in", shards)
    online = build(paths, s, stream=False)
    cached = online.cache(str(root / "cache"))
    want = list(online)
    got = list(cached)
    assert_items_equal(got, want)
    on_it, cache_it = online.iter(), cached.iter()
    list(on_it), list(cache_it)
    assert on_it.stats() == cache_it.stats()
    step = int(cut * len(want))
    it = online.iter()
    head = list(itertools.islice(it, step))
    assert_items_equal(head, want[:step])
    assert_items_equal(list(cached.iter(json.loads(json.dumps(it.state_dict())))), want[step:])

"""Forged or stale states: each is refused with a specific message, never
resumed as a silently different stream."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import pytest

from beamtok import Dataset, StateError

from conftest import real_paragraphs, write_jsonl


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("forged")
    docs = [{"text": t} for t in real_paragraphs(60, start=300)]
    return {
        "jsonl": str(write_jsonl(root / "a.jsonl", docs[:30])),
        "gz": str(write_jsonl(root / "b.jsonl.gz", docs[30:], "gz")),
    }


def dataset(paths: list[str], tokenizer_dir: str, shuffle: bool = True) -> Dataset:
    ds = Dataset.from_files(paths).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(32)
    return (ds.shuffle(4, seed=1) if shuffle else ds).batch(2)


def state_after(ds: Dataset, batches: int) -> dict[str, Any]:
    it = ds.iter()
    for _ in range(batches):
        next(it)
    return it.state_dict()


def source_of(state: dict[str, Any]) -> dict[str, Any]:
    node = state["pipeline"]
    while "upstream" in node:
        node = node["upstream"]
    return node


def edited(state: dict[str, Any], edit: Any) -> dict[str, Any]:
    out = copy.deepcopy(state)
    edit(out)
    return out


def refused(ds: Dataset, state: dict[str, Any], message: str) -> None:
    with pytest.raises(StateError, match=message):
        list(ds.iter(state))


def test_another_world_size_and_dataloader_worker_count(files, tokenizer_dir):
    paths = [files["jsonl"], files["gz"]]
    two = dataset(paths, tokenizer_dir).shard_by_rank(0, 2)
    state = state_after(two, 1)
    refused(dataset(paths, tokenizer_dir), state, r"rank split differs; to resume on another world size pass the list")
    refused(dataset(paths, tokenizer_dir).shard_by_rank(0, 2, split="examples"), state, "rank split")
    forged = edited(state, lambda s: s["split"].update(num_workers=2))
    refused(two, forged, "belongs to reader")


def test_tokenization_worker_count_is_not_part_of_a_state(files, tokenizer_dir):
    """Worker processes change nothing in the stream, so a state moves between worker counts."""
    paths = [files["jsonl"], files["gz"]]
    state = state_after(dataset(paths, tokenizer_dir).parallel(2), 3)
    rest = [b["input_ids"].tolist() for b in dataset(paths, tokenizer_dir).iter(state)]
    again = [b["input_ids"].tolist() for b in dataset(paths, tokenizer_dir).parallel(1).iter(state)]
    assert rest == again and rest


# (what is forged, which file, the edit of the open shard's cursor given the file's size, the refusal)
CURSOR_EDITS = [
    (
        "past the end of a JSONL shard",
        "jsonl",
        lambda c, size: c.update(doc=size + 100, token=0),
        r"a\.jsonl: doc cursor \(byte offset \d+\) is past the end",
    ),
    (
        "in the middle of a line",
        "jsonl",
        lambda c, size: c.update(doc=7, token=0),
        r"a\.jsonl: doc cursor \(byte offset 7\) is not at the start of a line",
    ),
    (
        "past the end of a gzip shard",
        "gz",
        lambda c, size: c.update(doc=5000, token=0),
        r"b\.jsonl\.gz: doc cursor \(line 5001\) is past the end of the file \(30 lines\)",
    ),
    (
        "token offset past its document",
        "jsonl",
        lambda c, size: c.update(token=10**6),
        r"token offset 1000000 in document \d+ does not exist",
    ),
]


@pytest.mark.parametrize(("name", "key", "edit", "message"), CURSOR_EDITS, ids=[c[0] for c in CURSOR_EDITS])
def test_forged_cursor_is_refused(files, tokenizer_dir, name, key, edit, message):
    ds = dataset([files[key]], tokenizer_dir, shuffle=False)
    state = state_after(ds, 1)
    size = os.path.getsize(files[key])
    refused(ds, edited(state, lambda s: edit(source_of(s)["slots"][0]["cursor"], size)), message)


def test_nonsense_edits(files, tokenizer_dir):
    ds = dataset([files["jsonl"], files["gz"]], tokenizer_dir)
    state = state_after(ds, 2)
    cases = [
        (lambda s: source_of(s).update(epoch="zero"), "epoch"),
        (lambda s: source_of(s).update(epoch=3), "past the last epoch"),
        (lambda s: source_of(s).update(position=-1), "position"),
        (lambda s: source_of(s).update(position=9), "past this reader's 2 shards"),
        (lambda s: source_of(s).update(turn=5), "turn"),
        (lambda s: source_of(s)["slots"][0].update(shard=7), "shard 7 does not exist"),
        (lambda s: source_of(s)["slots"][0]["cursor"].update(done="yes"), "'done' must be a boolean"),
        (lambda s: source_of(s)["slots"][0]["cursor"].pop("doc"), "exactly the keys"),
        (lambda s: source_of(s)["stats"].update(examples=-3), "examples"),
        (lambda s: s["pipeline"].update(emitted=-1), "emitted"),
        (lambda s: s["pipeline"]["upstream"].update(emitted=99), "emitted"),
        (lambda s: s["pipeline"].pop("upstream"), "keys"),
        (lambda s: s.update(pipeline=[]), "state must be a JSON object"),
        (lambda s: s.update(spec=None), "spec fingerprint"),
    ]
    for edit, message in cases:
        with pytest.raises(StateError, match=message):
            list(ds.iter(edited(state, edit)))
    json.dumps(state)  # the original is untouched and still JSON


def test_state_of_an_older_beamtok_state_version(files, tokenizer_dir):
    ds = dataset([files["jsonl"]], tokenizer_dir)
    refused(ds, {**state_after(ds, 1), "beamtok_state": 0}, "format version 0 is not supported")

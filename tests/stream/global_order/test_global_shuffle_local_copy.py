"""The global shuffle's local copy: the same rows, batches and states as decoding row groups,
built once per machine at the first next(), rebuilt for other cache content, never half-read."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from beamtok import CacheError, Dataset
from beamtok._src.cache.read import random_access
from beamtok._src.cache.read.local_rows import copy_key, local_rows
from beamtok._src.cache.read.reader import Cache
from beamtok._src.stream.stages.collate import collate
from beamtok.testing import assert_items_equal, check_resumption

from conftest import CORPUS, ROOT, cache_without_beam

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
SFT_DATA = str(ROOT / "data" / "sft" / "shakespeare-dialogue.jsonl")
FILES = [
    str(CORPUS / "shakespeare-00.jsonl"),
    str(CORPUS / "shakespeare-01.jsonl"),
    str(CORPUS / "pydocs-00.jsonl.zst"),
]


@pytest.fixture(scope="module")
def caches(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("local-rows")
    made = {
        # filter_length skips documents: their counts ride on rows and must survive the copy
        "packed": Dataset.from_files(FILES)
        .tokenize(TOKENIZER)
        .filter_length(min_tokens=6000)
        .ensure_bos_eos()
        .concat_chunk(128),
        "ragged": Dataset.from_files(FILES[:1])
        .tokenize(TOKENIZER)
        .sliding_window(96, stride=64),  # last windows shorter
        "supervised": Dataset.from_files(SFT_DATA).tokenize_sft(TOKENIZER).pack_examples(160),
    }
    out = {}
    for name, ds in made.items():
        out[name] = str(root / name)
        cache_without_beam(ds, out[name], row_group_rows=8)
    return out


def shuffled(cache: str, copy: bool | str, **options) -> Dataset:
    return Dataset.from_cache(cache).global_shuffle(seed=7, local_copy=copy, **options)


@pytest.mark.parametrize("kind", ["packed", "ragged", "supervised"])
def test_local_copy_gives_the_rows_decoding_gives(caches, kind, tmp_path):
    cache = caches[kind]
    decoding, copying = shuffled(cache, False).repeat(2).iter(), shuffled(cache, str(tmp_path)).repeat(2).iter()
    decoded, copied = [], []
    for a, b in zip(decoding, copying):  # the states carry the document counts the rows hold
        decoded.append(a)
        copied.append(b)
        assert decoding.state_dict() == copying.state_dict(), f"after {len(decoded)} rows"
    assert_items_equal(copied + list(copying), decoded + list(decoding))
    assert decoding.state_dict() == copying.state_dict()
    if kind == "packed":
        assert decoding.state_dict()["pipeline"]["stats"]["documents"]["skipped"], "the data skips no document"
    assert len(decoded) == 2 * Cache(cache).manifest.totals["rows"]
    if kind == "supervised":
        assert "labels" in copied[0] and (copied[0]["labels"] == -100).any()
    if kind == "ragged":
        assert len({len(ex["input_ids"]) for ex in copied}) > 1


@pytest.mark.parametrize("kind", ["packed", "ragged"])
@pytest.mark.parametrize("copy", [False, True])
def test_batches_are_the_examples_collated_and_states_agree(caches, kind, copy, tmp_path):
    where: bool | str = str(tmp_path) if copy else False
    examples = list(shuffled(caches[kind], where, window=50).shard_by_rank(1, 3, split="examples"))
    pad_id = Cache(caches[kind]).spec.pad_id
    it = shuffled(caches[kind], where, window=50).shard_by_rank(1, 3, split="examples").batch(7).iter()
    batches = list(it)
    want = [collate(examples[k : k + 7], pad_id) for k in range(0, len(examples), 7)]
    assert_items_equal(batches, want)
    one_by_one = shuffled(caches[kind], where, window=50).shard_by_rank(1, 3, split="examples").iter()
    for _ in examples:
        next(one_by_one)
    assert one_by_one.state_dict()["pipeline"] == it.state_dict()["pipeline"]["upstream"]


def test_resume_crosses_between_local_copy_and_decoding(caches, tmp_path):
    cache = caches["packed"]
    check_resumption(lambda: shuffled(cache, str(tmp_path)).repeat(2).batch(5), random_steps=8, seed=2)
    it = shuffled(cache, str(tmp_path)).batch(5).iter()
    for _ in range(9):
        next(it)
    resumed = shuffled(cache, False).batch(5).iter(it.state_dict())
    assert_items_equal(list(resumed), list(it))


def test_copy_is_made_at_the_first_next_once_per_machine(caches, tmp_path):
    cache = caches["packed"]
    it = shuffled(cache, str(tmp_path)).iter()
    assert not any(tmp_path.iterdir())  # nothing before next()
    next(it)
    (copy,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert copy.name == copy_key(Cache(cache)) and (copy / "rows.json").exists()
    made = (copy / "rows.json").stat().st_mtime_ns
    list(shuffled(cache, str(tmp_path)).shard_by_rank(0, 2))
    assert (copy / "rows.json").stat().st_mtime_ns == made
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [copy.name]


def _build_in_process(cache: str, root: str, out: str) -> None:
    rows = local_rows(Cache(cache), root)
    Path(out).write_text(json.dumps({"rows": rows.total, "directory": rows.directory}))


def test_processes_starting_together_share_one_build(caches, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(
            target=_build_in_process, args=(caches["packed"], str(tmp_path / "copies"), str(tmp_path / f"{i}.json"))
        )
        for i in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    answers = [json.loads((tmp_path / f"{i}.json").read_text()) for i in range(3)]
    assert len({a["directory"] for a in answers}) == 1
    assert sorted(p.name for p in (tmp_path / "copies").iterdir() if p.is_dir()) == [Path(answers[0]["directory"]).name]


def test_unfinished_copies_are_never_read_and_are_cleared(caches, tmp_path):
    cache = Cache(caches["packed"])
    key = copy_key(cache)
    half = tmp_path / key
    half.mkdir()
    (half / "input_ids.bin").write_bytes(b"\0" * 64)  # no rows.json: a copy cut off mid-rename never looks like this
    (tmp_path / f"{key}.tmp-deadbeef").mkdir()  # a builder that died
    with pytest.raises(OSError):
        local_rows(cache, str(tmp_path))  # a directory in the way of the rename is not silently replaced
    import shutil

    shutil.rmtree(half)
    rows = local_rows(cache, str(tmp_path))
    assert rows.total == cache.manifest.totals["rows"]
    assert not list(tmp_path.glob("*.tmp-*"))


def test_other_content_gets_its_own_copy(caches, tmp_path):
    keys = {copy_key(Cache(caches[kind])) for kind in caches}
    assert len(keys) == 3


def test_the_default_copies_only_a_cache_larger_than_the_decode_budget(caches, tmp_path, monkeypatch):
    monkeypatch.setenv("BEAMTOK_LOCAL_ROWS", str(tmp_path))
    it = Dataset.from_cache(caches["packed"]).global_shuffle(seed=1).iter()
    next(it)
    assert it.source.source.reads_local_copy is False and not any(tmp_path.iterdir())
    monkeypatch.setattr(random_access, "DECODE_BUDGET", 64 << 10)
    it = Dataset.from_cache(caches["packed"]).global_shuffle(seed=1).iter()
    next(it)
    assert it.source.source.reads_local_copy is True and any(p.is_dir() for p in tmp_path.iterdir())


def test_a_disk_without_room_is_refused_with_the_way_out(caches, tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10, 10, 1000))  # type: ignore[attr-defined]
    with pytest.raises(CacheError, match="local_copy=False"):
        list(shuffled(caches["packed"], str(tmp_path)))
    assert not any(p.is_dir() for p in tmp_path.iterdir())


def test_local_copy_option_is_checked_and_in_no_fingerprint(caches, tmp_path):
    from beamtok import ConfigError

    with pytest.raises(ConfigError, match="local_copy"):
        Dataset.from_cache(caches["packed"]).global_shuffle(local_copy=3)  # type: ignore[arg-type]
    a = shuffled(caches["packed"], False).iter()
    b = shuffled(caches["packed"], str(tmp_path)).iter()
    next(a), next(b)
    assert a.state_dict() == b.state_dict()
    assert os.path.isdir(tmp_path) and np.array_equal(next(a)["input_ids"], next(b)["input_ids"])

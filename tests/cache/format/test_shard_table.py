"""A large cache keeps its shard entries in a table beside a small manifest: it reads, shuffles,
verifies and re-runs exactly as the same cache with its entries inline, and a damaged, cut
or missing table is refused or reported by name."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from beamtok import CacheError, Dataset
from beamtok._src.cache.format import manifest as manifest_module
from beamtok._src.cache.read.verify import verify_cache
from beamtok.testing import assert_items_equal

from conftest import ROOT, real_paragraphs, write_jsonl

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
pytest.importorskip("apache_beam")


@pytest.fixture
def two_caches(tmp_path, monkeypatch):
    paras = real_paragraphs(60)
    paths = [
        str(write_jsonl(tmp_path / f"p-{i}.jsonl", [{"text": t} for t in paras[i * 10 : (i + 1) * 10]]))
        for i in range(6)
    ]
    online = Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(32)
    inline = online.cache(str(tmp_path / "inline"))
    monkeypatch.setattr(manifest_module, "INLINE_SHARDS", 3)  # six shards: past the limit
    table = online.cache(str(tmp_path / "table"))
    return online, inline, table, tmp_path / "table"


def test_the_table_cache_is_the_inline_cache(two_caches):
    online, inline, _, directory = two_caches
    table = Dataset.from_cache(str(directory))  # opened from its files, not the dataset the build returned
    inline = Dataset.from_cache(str(directory.parent / "inline"))
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["format"] == 3 and "shards" not in manifest and manifest["shard_table"]["shards"] == 6
    assert manifest["totals"] == json.loads((directory.parent / "inline" / "manifest.json").read_text())["totals"]
    assert manifest["totals"]["rows"] == len(list(online)) and manifest["totals"]["tokens"] == sum(
        int((r["segment_ids"] > 0).sum()) for r in online
    )
    assert (table.spec_fingerprint, table.stream_fingerprint) == (online.spec_fingerprint, online.stream_fingerprint)
    assert [s.url for s in table.shards] == [s.url for s in online.shards]
    for make in (
        lambda ds: ds.shuffle_shards(seed=2).interleave(2).batch(3),
        lambda ds: ds.global_shuffle(seed=4).batch(5),
    ):
        a, b = make(inline).iter(), make(table).iter()
        assert_items_equal(list(b), list(a))
        assert a.stats() == b.stats()
    from beamtok._src.cache.read.reader import Cache

    entries_inline, entries_table = (
        Cache(str(directory.parent / "inline")).manifest.shards,
        Cache(str(directory)).manifest.shards,
    )
    assert [e.to_json() for e in entries_table] == [e.to_json() for e in entries_inline]  # every field, in order
    for start in (7, 30, 61):  # seeks use the row counts: into later shards too
        assert_items_equal(list(table.iter_at(example=start)), list(inline.iter_at(example=start)))


def test_verify_and_a_rerun_work_on_a_table_cache(two_caches):
    online, _, _, directory = two_caches
    report = verify_cache(str(directory), sample=2)
    assert report.ok, report.problems
    shown = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "stats", str(directory)], capture_output=True, text=True, cwd=ROOT
    )
    assert shown.returncode == 0 and "6 shards" in shown.stdout, shown.stderr
    again = online.cache(str(directory))  # every shard reused, the manifest and table written again
    assert_items_equal(list(again), list(online))


def test_a_damaged_cut_or_missing_table_is_named(two_caches):
    _, _, _, directory = two_caches
    table = directory / "shards.arrow"
    blob = bytearray(table.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    table.write_bytes(bytes(blob))
    assert any("shards.arrow: SHA-256 differs" in p for p in verify_cache(str(directory), sample=0).problems)
    table.write_bytes(bytes(blob[:-10]))
    with pytest.raises(CacheError, match=r"shards.arrow: \d+ bytes, but the manifest says"):
        Dataset.from_cache(str(directory))
    table.unlink()
    with pytest.raises(CacheError, match=r"shards\.arrow: missing"):
        Dataset.from_cache(str(directory))


def test_a_large_cache_checks_each_shard_file_when_a_reader_first_opens_it(two_caches):
    """A reader of a table cache checks the files it opens, not all of them at open; a missing or
    cut file is still refused by name before any of its rows is read."""
    _, _, _, directory = two_caches
    files = sorted((directory / "shards").glob("shard-*.parquet"))
    files[4].unlink()
    blob = files[1].read_bytes()
    files[1].write_bytes(blob[:-100])
    reader = Dataset.from_cache(str(directory)).shard_by_rank(1, 3)  # owns shards 1 and 4
    untouched = Dataset.from_cache(str(directory)).shard_by_rank(0, 3)  # owns shards 0 and 3: both whole
    assert len(list(untouched)) > 0
    with pytest.raises(
        CacheError,
        match=rf"{files[1].name}: {len(blob) - 100} bytes, but the manifest says {len(blob)} \(truncated or replaced\); run `beamtok verify`",
    ):
        next(iter(reader))
    files[1].write_bytes(blob)
    with pytest.raises(
        CacheError, match=rf"{files[4].name}: shard file is missing; re-run `beamtok cache` to rebuild it"
    ):
        list(reader)
    report = verify_cache(str(directory), sample=0)
    assert any(files[4].name in p for p in report.problems)

"""Corrupt, stale and forged caches: reading refuses each with a specific
message, and ``beamtok verify`` reports each."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from beamtok import CacheError, Dataset, StateError
from beamtok.testing import assert_items_equal

from conftest import ROOT, real_paragraphs, write_jsonl

pytest.importorskip("apache_beam")


def online(paths: list[str], tokenizer_dir: str, seq_len: int = 32) -> Dataset:
    return Dataset.from_files(paths).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(seq_len)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, tokenizer_dir):
    root = tmp_path_factory.mktemp("corrupt")
    docs = [{"text": t} for t in real_paragraphs(240, start=500)]
    paths = [str(write_jsonl(root / f"in-{i}.jsonl", docs[i * 80 : (i + 1) * 80])) for i in range(3)]
    out = root / "cache"
    online(paths, tokenizer_dir).cache(str(out))
    return paths, out


@pytest.fixture
def cache(pristine, tmp_path):
    paths, out = pristine
    copy_dir = tmp_path / "cache"
    shutil.copytree(out, copy_dir)
    return paths, copy_dir


def shard_file(cache_dir: Path, index: int = 1) -> Path:
    return cache_dir / "shards" / f"shard-{index:05d}.parquet"


def read_all(cache_dir: Path) -> None:
    for _ in Dataset.from_cache(str(cache_dir)):
        pass


def verify(cache_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "verify", str(cache_dir), "--shards", "0", *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def assert_verify_reports(cache_dir: Path, message: str, *extra: str) -> None:
    proc = verify(cache_dir, *extra)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr, proc.stderr


def test_intact_cache_reads_and_verifies(cache):
    _, cache_dir = cache
    read_all(cache_dir)
    assert verify(cache_dir).returncode == 0


def test_no_manifest_means_unfinished(cache):
    _, cache_dir = cache
    (cache_dir / "manifest.json").unlink()
    with pytest.raises(CacheError, match="cache is unfinished"):
        read_all(cache_dir)
    assert_verify_reports(cache_dir, "cache is unfinished")


def test_other_fingerprint_than_requested(cache, tokenizer_dir):
    paths, cache_dir = cache
    other = online(paths, tokenizer_dir, seq_len=48).spec_fingerprint
    with pytest.raises(CacheError, match=f"not the requested {other}"):
        Dataset.from_cache(str(cache_dir), fingerprint=other)
    assert_verify_reports(cache_dir, f"not the requested {other}", "--fingerprint", other)
    with pytest.raises(CacheError, match="pass --overwrite"):
        online(paths, tokenizer_dir, seq_len=48).cache(str(cache_dir))


def test_a_refused_build_leaves_nothing_in_the_temporary_directory(cache, tokenizer_dir, tmp_path, monkeypatch):
    """Beam makes a temporary directory for each pipeline it builds and removes it when the
    pipeline runs: a build refused before that (here, another spec on a finished cache) removes it too."""
    import tempfile

    paths, cache_dir = cache
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with pytest.raises(CacheError, match="pass --overwrite"):
        online(paths, tokenizer_dir, seq_len=48).cache(str(cache_dir))
    assert list(scratch.iterdir()) == []


def test_missing_shard_file(cache):
    _, cache_dir = cache
    shard_file(cache_dir).unlink()
    with pytest.raises(CacheError, match=r"shard-00001\.parquet: shard file is missing"):
        read_all(cache_dir)
    assert_verify_reports(cache_dir, "shard 1 (")
    assert_verify_reports(cache_dir, "file is missing")


def test_truncated_shard_file(cache):
    _, cache_dir = cache
    path = shard_file(cache_dir)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        CacheError, match=rf"shard-00001\.parquet: {len(data) // 2} bytes, but the manifest says {len(data)}"
    ):
        read_all(cache_dir)
    assert_verify_reports(cache_dir, "truncated or replaced")


@pytest.mark.parametrize("where", [0.1, 0.3, 0.5, "footer"])
def test_one_flipped_byte(cache, where):
    """A flip in a page fails its CRC as it is decoded; one in the metadata fails the footer
    checksum when the file is opened. ``verify`` finds either through the file's SHA-256."""
    _, cache_dir = cache
    path = shard_file(cache_dir)
    data = bytearray(path.read_bytes())
    position = len(data) - 30 if where == "footer" else int(len(data) * where)
    data[position] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(
        CacheError, match=r"shard-00001\.parquet: .*(corrupt|checksum mismatch|not a readable Parquet file)"
    ):
        read_all(cache_dir)
    assert_verify_reports(cache_dir, "checksum mismatch")


def test_manifest_naming_files_outside_the_cache(cache):
    _, cache_dir = cache
    manifest = json.loads((cache_dir / "manifest.json").read_text())
    for forged in ("../outside.parquet", "/etc/hostname"):
        bad = copy.deepcopy(manifest)
        bad["shards"][0]["file"] = forged
        (cache_dir / "manifest.json").write_text(json.dumps(bad))
        with pytest.raises(CacheError, match="outside the cache directory"):
            read_all(cache_dir)
        assert_verify_reports(cache_dir, "outside the cache directory")


def test_forged_cursor_into_a_cache(cache):
    _, cache_dir = cache
    ds = Dataset.from_cache(str(cache_dir)).batch(2)
    it = ds.iter()
    for _ in range(3):
        next(it)
    state = it.state_dict()
    slot = state["pipeline"]["upstream"]["slots"][0]

    forged = copy.deepcopy(state)
    forged["pipeline"]["upstream"]["slots"][0]["cursor"]["doc"] = slot["cursor"]["doc"] + 1
    with pytest.raises(StateError, match="does not match the cache's row"):
        list(ds.iter(forged))
    forged = copy.deepcopy(state)
    forged["pipeline"]["upstream"]["slots"][0]["cursor"]["index"] = 10**6
    with pytest.raises(StateError, match="cursor at example 1000000, but the shard has"):
        list(ds.iter(forged))


def test_a_rerun_rebuilds_an_altered_shard_and_keeps_the_rest(cache, tokenizer_dir):
    paths, cache_dir = cache
    path = shard_file(cache_dir)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    report = verify(cache_dir)
    assert (
        report.returncode == 1 and "to repair: re-run the `beamtok cache` command that built the cache" in report.stderr
    )
    kept = {i: shard_file(cache_dir, i).stat().st_mtime_ns for i in (0, 2)}
    online(paths, tokenizer_dir).cache(str(cache_dir))  # the same build again
    assert {i: shard_file(cache_dir, i).stat().st_mtime_ns for i in (0, 2)} == kept  # intact shards reused
    assert verify(cache_dir).returncode == 0
    assert_items_equal(list(Dataset.from_cache(str(cache_dir))), list(online(paths, tokenizer_dir)))


def test_overwrite_rebuilds_every_shard_of_the_same_spec(cache, tokenizer_dir):
    paths, cache_dir = cache
    before = {i: shard_file(cache_dir, i).stat().st_mtime_ns for i in range(3)}
    online(paths, tokenizer_dir).cache(str(cache_dir), overwrite=True)
    after = {i: shard_file(cache_dir, i).stat().st_mtime_ns for i in range(3)}
    assert all(after[i] != before[i] for i in range(3)), (before, after)
    assert verify(cache_dir).returncode == 0


def test_verify_compares_every_row_group(tmp_path, tokenizer_dir):
    """A shard rewritten consistently (its checksums updated) with one token changed in its last
    row group passes every checksum; the row-by-row re-run must still find it."""
    import hashlib

    import pyarrow.parquet as pq

    from beamtok._src.cache.format.storage import Storage

    docs = [{"text": t} for t in real_paragraphs(60, start=300)]
    paths = [str(write_jsonl(tmp_path / "in.jsonl", docs))]
    out = tmp_path / "cache"
    online(paths, tokenizer_dir).cache(str(out), row_group_rows=4)
    path = shard_file(out, 0)
    original = pq.ParquetFile(path)
    assert original.metadata.num_row_groups > 3
    table = original.read()
    ids = table.column("input_ids").to_pylist()
    ids[-1][5] = (ids[-1][5] + 1) % 50000  # the last row group's last row
    import pyarrow as pa

    table = table.set_column(
        table.schema.get_field_index("input_ids"),
        table.schema.field("input_ids"),
        pa.array(ids, type=table.schema.field("input_ids").type),
    )
    pq.write_table(table, path, row_group_size=4)
    manifest = json.loads((out / "manifest.json").read_text())
    entry = manifest["shards"][0]
    entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    entry["bytes"] = path.stat().st_size
    entry["footer_sha256"] = Storage(str(out)).parquet_footer_sha256(entry["file"])
    (out / "manifest.json").write_text(json.dumps(manifest))
    report = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "verify", str(out), "--shards", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert (
        report.returncode == 1
        and f"shard 0 row {len(ids) - 1} field 'input_ids' differs from the on-the-fly result" in report.stderr
    ), report.stderr

"""Large files tokenized in ranges on several Beam workers: the cache is byte for byte the one
an unsplit build writes, and the on-the-fly stream's, for JSONL, Parquet and SFT data."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beamtok import ConfigError, Dataset, InputError
from beamtok._src.cache.build.ranges import RANGES_DIR, parse_size, plan_ranges
from beamtok._src.core.spec import SourceSpec
from beamtok._src.sources.urls import Shard
from beamtok.testing import assert_items_equal, check_equivalent

from conftest import CORPUS, ROOT, portable_job_service, real_paragraphs

pytest.importorskip("apache_beam")
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
SPLIT = 20_000  # bytes: dozens of ranges in a shipped 1 MB file


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[str]:
    """Two shipped JSONL files (~1 MB), a shipped zstd file (one range), a Parquet file of
    small row groups, a JSONL file with blank lines, CRLF endings and no final newline, and a
    shipped plain text file (one document, so one range)."""
    root = tmp_path_factory.mktemp("inputs")
    paras = real_paragraphs(1500)
    table = pa.table({"text": paras[:300], "id": list(range(300))})
    pq.write_table(table, root / "paras.parquet", row_group_size=7)
    lines = [json.dumps({"text": t}) for t in paras[300:]]
    odd = "\n".join(lines[:300]) + "\n\n\n" + "\r\n".join(lines[300:600]) + "\r\n" + "\n".join(lines[600:])
    (root / "odd.jsonl").write_text(odd, encoding="utf-8")
    milton = sorted(str(p) for p in (CORPUS / "milton").glob("*.txt"))[0]  # plain text: one document, one range
    return [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "shakespeare-01.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst"),
            str(root / "paras.parquet"), str(root / "odd.jsonl"), milton]  # fmt: skip


def online(inputs: list[str]) -> Dataset:
    return Dataset.from_files(inputs).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(256)


@pytest.fixture(scope="module")
def unsplit(inputs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("unsplit") / "cache"
    online(inputs).cache(str(out), split_bytes=None, progress=False)
    return out


def shard_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((directory / "shards").iterdir()) if p.is_file()}


def same_cache(got: Path, want: Path) -> None:
    assert shard_files(got) == shard_files(want)  # Parquet files and sidecars, byte for byte
    a, b = (json.loads((d / "manifest.json").read_text()) for d in (got, want))
    for manifest in (a, b):
        manifest.pop("created")
    assert a == b
    assert not (got / RANGES_DIR).exists()


def test_split_build_in_process_equals_unsplit_and_the_stream(inputs, unsplit, tmp_path):
    out = tmp_path / "split"
    cached = online(inputs).cache(str(out), split_bytes=SPLIT, progress=False)
    same_cache(out, unsplit)
    check_equivalent(lambda: cached.batch(3), lambda: online(inputs).batch(3), random_steps=6)


def test_split_build_on_two_worker_processes(inputs, unsplit, tmp_path):
    out = tmp_path / "split"
    online(inputs).cache(
        str(out), split_bytes=SPLIT, progress=False, direct_running_mode="multi_processing", direct_num_workers=2
    )
    same_cache(out, unsplit)


def test_split_build_through_the_portable_job_service(inputs, unsplit, tmp_path):
    out = tmp_path / "split"
    with portable_job_service() as endpoint:
        online(inputs).cache(
            str(out), split_bytes=SPLIT, runner="PortableRunner", job_endpoint=endpoint, environment_type="LOOPBACK"
        )
    same_cache(out, unsplit)


def test_ranges_cover_every_document_once_at_line_starts(inputs):
    source = SourceSpec()
    for url in inputs:
        shard = Shard(0, url)
        parts = plan_ranges(shard, source, SPLIT)
        if url.endswith((".zst", ".txt")):
            assert len(parts) == 1 and parts[0].stop is None
            continue
        assert len(parts) >= 3
        assert [p.number for p in parts] == list(range(len(parts))) and {p.count for p in parts} == {len(parts)}
        assert parts[0].start == 0 and parts[-1].stop is None
        assert all(a.stop == b.start for a, b in itertools.pairwise(parts))
        whole = [(d.cursor, d.value) for d in _documents(shard)]
        pieces = [(d.cursor, d.value) for p in parts for d in _documents(shard, p.start, p.stop)]
        assert pieces == whole
        if url.endswith(".jsonl"):
            data = Path(url).read_bytes()
            assert all(data[p.start - 1 : p.start] == b"\n" for p in parts[1:])


def test_ranges_are_of_equal_size(tmp_path):
    """A runner deals ranges out to workers by count: a small last range would leave one idle."""
    path = tmp_path / "lines.jsonl"
    path.write_text("".join(json.dumps({"text": f"line {i:05d} " + "x" * 80}) + "\n" for i in range(1000)))
    size = path.stat().st_size
    parts = plan_ranges(Shard(0, str(path)), SourceSpec(), size // 3 - 1)  # just under a third: 4 ranges
    sizes = [(p.stop or size) - p.start for p in parts]
    assert len(parts) == 4 and max(sizes) - min(sizes) <= 2 * 100, sizes
    assert all(s <= size // 3 for s in sizes)


def _documents(shard: Shard, start: int = 0, stop: int | None = None):
    from beamtok._src.shards.processor import ShardProcessor

    processor = ShardProcessor(Dataset.from_files(shard.url).spec)
    return list(processor.documents(shard, start, stop))


def bad_lines_file(path: Path, texts: list[str], bad: range) -> Path:
    """JSONL of ``texts`` with lines ``bad`` broken: odd ones malformed, even ones of the wrong type."""
    records = [json.dumps({"text": t}) for t in texts]
    for i in bad:
        records[i] = '{"text": "unterminated' if i % 2 else json.dumps({"text": 7})
    path.write_text("\n".join(records) + "\n", encoding="utf-8")
    return path


def test_bad_lines_inside_ranges_are_counted_as_unsplit(tmp_path, paragraphs):
    path = bad_lines_file(tmp_path / "bad.jsonl", paragraphs(300), range(5, 300, 37))
    make = lambda: Dataset.from_files(str(path), on_error="skip").tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(128)  # noqa: E731
    whole = make().cache(str(tmp_path / "whole"), split_bytes=None, progress=False)
    make().cache(str(tmp_path / "split"), split_bytes=3000, progress=False)
    same_cache(tmp_path / "split", tmp_path / "whole")
    skipped = json.loads((tmp_path / "split" / "manifest.json").read_text())["totals"]["documents"]["skipped"]
    assert skipped == {"malformed_json": 4, "wrong_type": 4}
    assert_items_equal(list(whole), list(make()))
    strict = Dataset.from_files(str(path)).tokenize(TOKENIZER).concat_chunk(128)
    with pytest.raises(InputError, match=r"bad\.jsonl: (line|byte) \d+: malformed JSON"):
        strict.cache(str(tmp_path / "strict"), split_bytes=3000, progress=False)


def test_sft_split_build_keeps_masks(tmp_path, paragraphs):
    paras = paragraphs(240)
    rows = [json.dumps({"prompt": paras[i], "completion": paras[i + 1]}) for i in range(0, 240, 2)]
    path = tmp_path / "sft.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    make = lambda: Dataset.from_files(str(path)).tokenize_sft(TOKENIZER, max_length=200).pack_examples(256)  # noqa: E731
    make().cache(str(tmp_path / "whole"), split_bytes=None, progress=False)
    make().cache(str(tmp_path / "split"), split_bytes=4000, progress=False)
    same_cache(tmp_path / "split", tmp_path / "whole")


def test_killed_split_build_leaves_ranges_that_a_rerun_clears(inputs, unsplit, tmp_path):
    out = tmp_path / "split"
    online(inputs).cache(str(out), split_bytes=SPLIT, progress=False)
    (out / "manifest.json").unlink()
    os.remove(out / "shards" / "shard-00001.parquet")
    os.remove(out / "records" / "shard-00001.json")
    (out / RANGES_DIR).mkdir()
    (out / RANGES_DIR / "shard-00001-range-00003-of-00050.arrow").write_bytes(b"half written")
    kept = {p.name: p.stat().st_mtime_ns for p in (out / "shards").glob("*.parquet")}  # shard 0 was split too
    online(inputs).cache(str(out), split_bytes=SPLIT, progress=False)
    same_cache(out, unsplit)
    assert {name: (out / "shards" / name).stat().st_mtime_ns for name in kept} == kept  # reused, not tokenized again


def test_sizes():
    assert parse_size("64MB") == 64_000_000 and parse_size("1GiB") == 2**30 and parse_size("512k") == 512_000
    assert parse_size(4096) == 4096 and parse_size("1.5 GB") == 1_500_000_000
    for bad in ("lots", "10 parsecs", "0", "-5MB"):
        with pytest.raises(ConfigError, match="split"):
            parse_size(bad)


def test_cli_split_bytes(inputs, unsplit, tmp_path):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "beamtok._src.cli", "cache", *inputs, "--tokenizer", TOKENIZER, "--seq-len", "256"]
    done = subprocess.run(
        [*cmd, "--output", str(tmp_path / "c"), "--split-bytes", "20KB"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    same_cache(tmp_path / "c", unsplit)
    ranges = sum(
        len(plan_ranges(Shard(0, url), SourceSpec(), 20_000)) for url in inputs if not url.endswith((".zst", ".txt"))
    )
    assert (
        f"Beam counters: shards_written 6, shards_reused 0, split_shards 4, ranges {ranges:,}, pack_tasks 4, documents "
        in done.stdout
    )
    bad = subprocess.run(
        [*cmd, "--output", str(tmp_path / "d"), "--split-bytes", "lots"], capture_output=True, text=True, timeout=600
    )
    assert (
        bad.returncode == 2
        and bad.stderr.strip()
        == "beamtok: error: --split-bytes: 'lots' is not a size (write e.g. 268435456, 256MB, 64MiB or 1GB)"
    )

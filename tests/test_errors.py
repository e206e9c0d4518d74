"""Failure paths a user hits first: each gives one clear error naming what is wrong."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beamtok import CacheError, ConfigError, Dataset, InputError

from conftest import ROOT, write_jsonl


def test_broken_or_missing_tokenizer(tmp_path):
    with pytest.raises(ConfigError, match="cannot load tokenizer"):
        Dataset.from_sequence(["a"]).tokenize(str(tmp_path / "no-such-tokenizer"))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer.json").write_text("{not json")
    (broken / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    with pytest.raises(ConfigError, match="cannot load tokenizer"):
        Dataset.from_sequence(["a"]).tokenize(str(broken))


def test_parquet_without_the_text_column_names_the_row(tmp_path, tokenizer_dir):
    path = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"body": ["x", "y"]}), path)
    with pytest.raises(InputError, match=r"wrong\.parquet: row 0: no field 'text'"):
        list(Dataset.from_files(str(path)).tokenize(tokenizer_dir))
    with pytest.raises(InputError, match=r"no column\(s\) \['text'\]"):
        list(Dataset.from_files(str(path), columns=["text"]).tokenize(tokenizer_dir))


def test_empty_file_yields_nothing_and_counts_nothing(tmp_path, tokenizer_dir):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    it = Dataset.from_files(str(empty)).tokenize(tokenizer_dir).concat_chunk(8).iter()
    assert list(it) == [] and it.stats()["documents"]["read"] == 0


def test_not_a_parquet_file(tmp_path, tokenizer_dir):
    path = tmp_path / "fake.parquet"
    path.write_bytes(b"PAR1 but not really")
    with pytest.raises(InputError, match=r"fake\.parquet: not a readable Parquet file"):
        list(Dataset.from_files(str(path)).tokenize(tokenizer_dir))


def test_manifest_paths_outside_the_cache_are_refused(tmp_path, tokenizer_dir, paragraphs):
    pytest.importorskip("apache_beam")
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": t} for t in paragraphs(10)])
    out = tmp_path / "cache"
    Dataset.from_files(str(source)).tokenize(tokenizer_dir).concat_chunk(16).cache(str(out))
    manifest = json.loads((out / "manifest.json").read_text())
    for forged in ("../outside.parquet", "/etc/passwd", "shards/../../x.parquet"):
        manifest["shards"][0]["file"] = forged
        (out / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(CacheError, match="outside the cache directory"):
            Dataset.from_cache(str(out))


def test_cli_reports_a_bad_tokenizer_in_one_line(tmp_path):
    source = write_jsonl(tmp_path / "in.jsonl", [{"text": "hello"}])
    proc = subprocess.run(
        [sys.executable, "-m", "beamtok.cli", "cache", str(source), "-o", str(tmp_path / "c"), "--tokenizer", str(tmp_path / "nope"), "--seq-len", "8"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("beamtok: error: cannot load tokenizer")
    assert "Traceback" not in proc.stderr

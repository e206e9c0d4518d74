"""Failure paths a user hits first: each gives one clear error naming what is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beamtok import CacheError, ConfigError, Dataset, InputError

from conftest import ROOT, write_jsonl


def test_broken_or_missing_tokenizer(tmp_path):
    with pytest.raises(ConfigError, match=r"tokenizer directory .*no-such-tokenizer' does not exist"):
        Dataset.from_sequence(["a"]).tokenize(str(tmp_path / "no-such-tokenizer"))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer.json").write_text("{not json")
    (broken / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    with pytest.raises(ConfigError, match="cannot load tokenizer"):
        Dataset.from_sequence(["a"]).tokenize(str(broken))


def test_a_tokenizer_directory_given_as_a_path_loads_like_its_string(tokenizer_dir):
    from pathlib import Path

    as_path = list(Dataset.from_sequence(["one two", "three"]).tokenize(Path(tokenizer_dir)))
    as_string = list(Dataset.from_sequence(["one two", "three"]).tokenize(tokenizer_dir))
    assert [e["input_ids"].tolist() for e in as_path] == [e["input_ids"].tolist() for e in as_string]


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
        [
            sys.executable,
            "-m",
            "beamtok._src.cli",
            "cache",
            str(source),
            "-o",
            str(tmp_path / "c"),
            "--tokenizer",
            str(tmp_path / "nope"),
            "--seq-len",
            "8",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("beamtok: error: tokenizer directory")
    assert "Traceback" not in proc.stderr


def test_mistyped_tokenizer_directory_names_the_nearest(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(
        ConfigError, match=r"'data/tokenizers/gtp2' does not exist; did you mean 'data/tokenizers/gpt2'\?"
    ):
        Dataset.from_sequence(["a"]).tokenize("data/tokenizers/gtp2")
    with pytest.raises(ConfigError, match=r"'nowhere/dir/tok' does not exist \('nowhere/dir' does not exist either\)"):
        Dataset.from_sequence(["a"]).tokenize("nowhere/dir/tok")


@pytest.mark.parametrize("env", [{"HF_ENDPOINT": "http://127.0.0.1:9"}, {"HF_HUB_OFFLINE": "1"}])
def test_hub_name_without_the_hub_fails_at_once_with_the_way_out(tmp_path, env):
    """A hub name that is not cached, with the hub unreachable (a closed local port stands for
    no network) or offline mode set: one error naming why and what to do, no retries."""
    script = "from beamtok import Dataset\nDataset.from_sequence(['a']).tokenize('owner/some-tokenizer')"
    run_env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT") and "proxy" not in k.lower()
    }
    run_env.update(HF_HOME=str(tmp_path / "hf"), **env)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=run_env, timeout=120)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "not a local directory nor in the Hugging Face cache" in last and "HF_HUB_OFFLINE" in last
    assert ("cannot be reached" in last) if "HF_ENDPOINT" in env else ("HF_HUB_OFFLINE is set" in last)
    assert "Retrying" not in proc.stderr

"""Shard files other Parquet readers open: fastparquet and DuckDB read a ``--parquet-compat``
cache (and the default one) row for row as beamtok does; a directory keeps one form; files of
the earlier byte-stream-split form are still read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from beamtok import Dataset
from beamtok._src.cache.format import schema
from beamtok.testing import assert_items_equal

from conftest import CORPUS, ROOT

pytest.importorskip("apache_beam")
fastparquet = pytest.importorskip("fastparquet")
duckdb = pytest.importorskip("duckdb")
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
INPUTS = [
    str(CORPUS / "shakespeare-00.jsonl"),
    str(CORPUS / "shakespeare-01.jsonl"),
    str(CORPUS / "pydocs-00.jsonl.zst"),
]


def online() -> Dataset:
    return Dataset.from_files(INPUTS).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(256)


def cache_command(output: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        *INPUTS,
        "--output",
        str(output),
        "--tokenizer",
        TOKENIZER,
        "--seq-len",
        "256",
        "-q",
        *extra,
    ]


def shard_files(directory: Path) -> list[str]:
    return sorted(str(p) for p in (directory / "shards").glob("shard-*.parquet"))


def column_forms(files: list[str]) -> tuple[set[str], set[str]]:
    """The codecs and encodings of every column chunk of ``files``."""
    codecs: set[str] = set()
    encodings: set[str] = set()
    for f in files:
        meta = pq.ParquetFile(f).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                chunk = meta.row_group(g).column(c)
                codecs.add(chunk.compression)
                encodings.update(chunk.encodings)
    return codecs, encodings


def check_other_readers(directory: Path) -> None:
    """fastparquet and DuckDB read every shard's token ids and provenance as beamtok streams them."""
    examples = list(Dataset.from_cache(str(directory)))
    files = shard_files(directory)
    read = [fastparquet.ParquetFile(f).to_pandas(columns=["input_ids", "segment_ids", "shard", "index"]) for f in files]
    ids = [np.asarray(v) for frame in read for v in frame["input_ids"]]
    segments = [np.asarray(v) for frame in read for v in frame["segment_ids"]]
    assert len(ids) == len(examples) > 10
    for example, tokens, segs in zip(examples, ids, segments):
        np.testing.assert_array_equal(example["input_ids"], tokens)
        np.testing.assert_array_equal(example["segment_ids"], segs)
    listed = ", ".join(repr(f) for f in files)
    rows = duckdb.sql(f"select input_ids from read_parquet([{listed}]) order by shard, index").fetchall()
    assert [list(r[0]) for r in rows] == [e["input_ids"].tolist() for e in examples]


@pytest.mark.parametrize("split", [[], ["--split-bytes", "64KB"]], ids=["whole_shards", "split_shards"])
def test_a_compat_cache_reads_the_same_in_fastparquet_and_duckdb(tmp_path, split):
    out = tmp_path / "compat"
    built = subprocess.run(cache_command(out, "--parquet-compat", *split), capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    codecs, encodings = column_forms(shard_files(out))
    assert codecs == {"SNAPPY"} and "BYTE_STREAM_SPLIT" not in encodings
    check_other_readers(out)
    assert_items_equal(list(Dataset.from_cache(str(out))), list(online()))


def test_the_default_cache_reads_the_same_in_fastparquet_and_duckdb(tmp_path):
    out = tmp_path / "default"
    online().cache(str(out), progress=False)
    codecs, encodings = column_forms(shard_files(out))
    assert codecs == {"ZSTD"} and "BYTE_STREAM_SPLIT" not in encodings
    check_other_readers(out)


def test_a_directory_keeps_one_form(tmp_path):
    out = tmp_path / "c"
    first = subprocess.run(cache_command(out), capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    other = subprocess.run(cache_command(out, "--parquet-compat"), capture_output=True, text=True, timeout=600)
    assert other.returncode == 2
    assert "holds shard files written without --parquet-compat" in other.stderr and "--overwrite" in other.stderr
    assert "Traceback" not in other.stderr
    replaced = subprocess.run(
        cache_command(out, "--parquet-compat", "--overwrite"), capture_output=True, text=True, timeout=600
    )
    assert replaced.returncode == 0, replaced.stderr
    assert column_forms(shard_files(out))[0] == {"SNAPPY"}
    back = subprocess.run(cache_command(out), capture_output=True, text=True, timeout=600)
    assert back.returncode == 2 and "holds shard files written with --parquet-compat" in back.stderr


def test_byte_stream_split_files_of_earlier_builds_are_still_read(tmp_path, monkeypatch):
    """Caches written before the default changed hold token ids byte-stream-split."""
    earlier = {**schema.PARQUET_OPTIONS, "column_encoding": {"input_ids.list.element": "BYTE_STREAM_SPLIT"}}
    monkeypatch.setattr(schema, "PARQUET_OPTIONS", earlier)
    out = tmp_path / "earlier"
    online().cache(str(out), progress=False)
    assert "BYTE_STREAM_SPLIT" in column_forms(shard_files(out))[1]
    monkeypatch.undo()
    assert_items_equal(list(Dataset.from_cache(str(out))), list(online()))

"""A cache's ``shards/`` folder is what people point a reader at first
(``spark.read.parquet("cache/shards")``): it holds Parquet files alone, the sidecars live in
``records/``, and pyarrow's dataset API, DuckDB, polars, Hugging Face ``datasets`` and Spark
(where Java is present) each read the folder as the rows beamtok streams."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from beamtok import Dataset

from conftest import CORPUS, TOKENIZER_DIR

INPUTS = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    pytest.importorskip("apache_beam")
    out = tmp_path_factory.mktemp("folder") / "cache"
    Dataset.from_files(INPUTS).tokenize(str(TOKENIZER_DIR)).ensure_bos_eos().concat_chunk(256).cache(
        str(out), progress=False
    )
    return out


@pytest.fixture(scope="module")
def streamed(cache) -> list[tuple[int, int, list[int]]]:
    return [(int(e["shard"]), int(e["index"]), e["input_ids"].tolist()) for e in Dataset.from_cache(str(cache))]


def ordered(rows) -> list[tuple[int, int, list[int]]]:
    return sorted((int(s), int(i), list(ids)) for s, i, ids in rows)


def test_the_folder_holds_parquet_files_alone(cache):
    assert {p.suffix for p in (cache / "shards").iterdir()} == {".parquet"}
    assert sorted(p.name for p in (cache / "records").iterdir()) == ["shard-00000.json", "shard-00001.json"]


def test_pyarrow_dataset(cache, streamed):
    table = pads.dataset(str(cache / "shards"), format="parquet").to_table(columns=["shard", "index", "input_ids"])
    assert ordered(zip(*(table.column(c).to_pylist() for c in ("shard", "index", "input_ids")))) == streamed


def test_duckdb(cache, streamed):
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(f"select shard, index, input_ids from read_parquet('{cache / 'shards'}/*.parquet')").fetchall()
    assert ordered(rows) == streamed


def test_polars(cache, streamed):
    polars = pytest.importorskip("polars")
    frame = polars.read_parquet(str(cache / "shards"))
    assert ordered(zip(frame["shard"].to_list(), frame["index"].to_list(), frame["input_ids"].to_list())) == streamed


def test_hugging_face_datasets(cache, streamed, tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("parquet", data_dir=str(cache / "shards"), split="train", cache_dir=str(tmp_path / "hf"))
    assert ordered(zip(ds["shard"], ds["index"], ds["input_ids"])) == streamed


def test_spark(cache, streamed):
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("beamtok-folder")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    try:
        rows = spark.read.parquet(str(cache / "shards")).select("shard", "index", "input_ids").collect()
    finally:
        spark.stop()
    assert ordered((r["shard"], r["index"], r["input_ids"]) for r in rows) == streamed


def test_a_cache_of_the_earlier_layout_still_reads_and_rebuilds_nothing(cache, tmp_path, streamed):
    """Sidecars in ``shards/`` (caches written before ``records/``): read as before, and a re-run
    over them reuses every shard."""
    old = tmp_path / "old"
    shutil.copytree(cache, old)
    for sidecar in (old / "records").iterdir():
        sidecar.rename(old / "shards" / sidecar.name)
    (old / "records").rmdir()
    assert [
        (int(e["shard"]), int(e["index"]), e["input_ids"].tolist()) for e in Dataset.from_cache(str(old))
    ] == streamed
    stamps = {p.name: p.stat().st_mtime_ns for p in (old / "shards").glob("*.parquet")}
    (old / "manifest.json").unlink()
    Dataset.from_files(INPUTS).tokenize(str(TOKENIZER_DIR)).ensure_bos_eos().concat_chunk(256).cache(
        str(old), progress=False
    )
    assert {p.name: p.stat().st_mtime_ns for p in (old / "shards").glob("*.parquet")} == stamps

"""Hugging Face datasets by name or directory: save_to_disk Arrow files (Dataset and
DatasetDict) and data directories read as shards, resumable, and cached by the CLI with the
same rows as the stream; mistakes refused by name."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from beamtok import ConfigError, Dataset, InputError
from beamtok._src.sources.hf_files import hf_dataset_files, hub_url
from beamtok.testing import assert_items_equal, check_resumption

from conftest import ROOT, real_paragraphs, write_jsonl

datasets = pytest.importorskip("datasets")
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return real_paragraphs(90)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, texts):
    """A DatasetDict saved in several Arrow files per split, and one split alone."""
    root = tmp_path_factory.mktemp("hf")
    train = datasets.Dataset.from_dict({"text": texts[:60], "id": list(range(60))})
    test = datasets.Dataset.from_dict({"text": texts[60:], "id": list(range(60, 90))})
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(
        str(root / "dict"), num_shards={"train": 3, "test": 1}
    )
    train.save_to_disk(str(root / "single"), num_shards=2)
    return root


def packed(ds: Dataset) -> Dataset:
    return ds.tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64)


def test_saved_dataset_files_are_the_shards(saved, texts):
    files = hf_dataset_files(str(saved / "dict"), split="train")
    assert files.format == "arrow" and len(files.urls) == 3
    by_name = packed(Dataset.from_hf(str(saved / "dict"), split="train"))
    in_memory = packed(Dataset.from_hf(datasets.Dataset.from_dict({"text": texts[:60]}), shards=3))
    ids = [e["input_ids"].tolist() for e in by_name]
    assert ids == [e["input_ids"].tolist() for e in in_memory]  # every document once, in order
    assert {e["shard"] for e in by_name} == {0, 1, 2}
    assert len(list(packed(Dataset.from_hf(str(saved / "single"))))) > 0


def test_arrow_shards_resume_mid_file(saved):
    check_resumption(
        lambda: packed(Dataset.from_hf(str(saved / "dict"), split="train")).shuffle(8, seed=1).batch(2), random_steps=10
    )


def test_data_directory_through_the_builder(tmp_path, texts):
    data = tmp_path / "corpus" / "data"
    data.mkdir(parents=True)
    write_jsonl(data / "train-00000.jsonl", [{"text": t} for t in texts[:30]])
    write_jsonl(data / "train-00001.jsonl", [{"text": t} for t in texts[30:50]])
    files = hf_dataset_files(str(tmp_path / "corpus"))
    assert files.format == "jsonl" and len(files.urls) == 2
    direct = packed(Dataset.from_files(sorted(str(p) for p in data.iterdir())))
    assert_items_equal(list(packed(Dataset.from_hf(str(tmp_path / "corpus")))), list(direct))


def test_mistakes_are_refused_by_name(saved, tmp_path):
    with pytest.raises(ConfigError, match=r"no split 'validation'; its splits are \['train', 'test'\]"):
        Dataset.from_hf(str(saved / "dict"), split="validation")
    with pytest.raises(ConfigError, match=r"holds several splits \(\['test', 'train'\]\)"):
        Dataset.from_hf(datasets.load_from_disk(str(saved / "dict")))
    with pytest.raises(ConfigError, match=r"read in its own 2 shards; drop shards="):
        Dataset.from_hf(datasets.Dataset.from_dict({"text": ["a", "b"]}).to_iterable_dataset(num_shards=2), shards=4)
    with pytest.raises(ConfigError, match="no such directory"):
        Dataset.from_hf(str(tmp_path / "missing"))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "state.json").write_text(
        json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]})
    )
    with pytest.raises(InputError, match="missing"):
        Dataset.from_hf(str(tmp_path / "broken"))


def test_hub_data_files_become_https_urls():
    assert hub_url("hf://datasets/owner/name@abc123/data/train-0.parquet") == (
        "https://huggingface.co/datasets/owner/name/resolve/abc123/data/train-0.parquet"
    )
    assert (
        hub_url("hf://datasets/owner/name/x.jsonl") == "https://huggingface.co/datasets/owner/name/resolve/main/x.jsonl"
    )
    assert hub_url("/local/file.jsonl") == "/local/file.jsonl"


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_cli_caches_a_saved_dataset(saved, tmp_path):
    out = tmp_path / "cache"
    cmd = [sys.executable, "-m", "beamtok._src.cli", "cache", "--hf-dataset", str(saved / "dict"), "--split", "test"]
    cmd += ["--output", str(out), "--tokenizer", TOKENIZER, "--seq-len", "64", "-q"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["documents"]["read"] == 30
    assert_items_equal(
        list(Dataset.from_cache(str(out))), list(packed(Dataset.from_hf(str(saved / "dict"), split="test")))
    )
    both = subprocess.run([*cmd, "extra.jsonl"], capture_output=True, text=True, timeout=600)
    assert both.returncode != 0 and "either URL arguments or --hf-dataset" in both.stderr


def test_streamed_iterable_dataset_is_read_in_its_shards_and_resumes(tokenizer_dir):
    from conftest import real_paragraphs

    texts = real_paragraphs(50)
    streamed = datasets.Dataset.from_dict({"text": texts}).to_iterable_dataset(num_shards=3)
    ds = Dataset.from_hf(streamed)
    assert len(ds.shards) == 3
    in_shard_order = [row["text"] for i in range(3) for row in streamed.shard(num_shards=3, index=i)]
    assert sorted(in_shard_order) == sorted(texts)
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(tokenizer_dir)
    documents = list(ds.tokenize(tokenizer_dir))
    assert [reference.decode(d["input_ids"]) for d in documents] == in_shard_order
    check_resumption(lambda: packed(Dataset.from_hf(streamed)).batch(3), random_steps=6)
    it = packed(Dataset.from_hf(streamed)).iter()
    list(it)
    assert it.stats()["documents"]["read"] == 50

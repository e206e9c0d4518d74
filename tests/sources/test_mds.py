"""MosaicML Streaming (MDS) datasets as a source: shards written by streaming's own MDSWriter,
read in order, resumed by seeking to the sample, cached, and read from an S3 server."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from beamtok import ConfigError, Dataset, InputError
from beamtok.testing import assert_items_equal, check_equivalent, check_resumption

from conftest import ROOT, real_paragraphs

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


def mds_writer() -> Any:
    """streaming.MDSWriter. The package's top level imports its vision datasets (torchvision,
    which this project does not install); the writer needs none of that, so the package is
    registered without running its ``__init__`` and the writer's own modules load as usual."""
    if "streaming" not in sys.modules:
        spec = importlib.util.find_spec("streaming")
        assert spec is not None and spec.submodule_search_locations, (
            "mosaicml-streaming is not installed (make setup installs it)"
        )
        package = types.ModuleType("streaming")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["streaming"] = package
    from streaming.base.format.mds.writer import MDSWriter

    return MDSWriter


def write_mds(out: Path, texts: list[str], *, compression: str | None = None, size_limit: int = 4096) -> Path:
    columns = {"text": "str", "id": "int", "meta": "json", "score": "float32", "source": "str"}
    with mds_writer()(out=str(out), columns=columns, compression=compression, size_limit=size_limit) as writer:
        for i, text in enumerate(texts):
            writer.write(
                {"text": text, "id": i, "meta": {"n": i, "tags": ["a", str(i)]}, "score": i / 4, "source": f"doc-{i}"}
            )
    return out


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return real_paragraphs(80)


@pytest.fixture(scope="module")
def mds_dirs(tmp_path_factory, texts) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mds")
    return {c or "raw": write_mds(root / (c or "raw"), texts, compression=c) for c in (None, "zstd", "gz")}


def packed(ds: Dataset, seq_len: int = 64) -> Dataset:
    return ds.tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(seq_len)


@pytest.mark.parametrize("kind", ["raw", "zstd", "gz"])
def test_samples_read_in_index_order_with_their_columns(mds_dirs, texts, kind):
    ds = Dataset.from_mds(mds_dirs[kind])
    assert len(ds.shards) >= 5  # size_limit made several shards
    records = list(ds)
    assert [r["text"] for r in records] == texts
    assert records[7]["id"] == 7 and records[7]["meta"] == {"n": 7, "tags": ["a", "7"]}
    assert records[7]["score"] == 1.75 and records[7]["source"] == "doc-7"
    assert type(records[7]["id"]) is int and type(records[7]["score"]) is float
    only = list(Dataset.from_mds(mds_dirs[kind], columns=["source", "text"]))
    assert {k: only[3].get(k) for k in ("source", "text", "id")} == {"source": "doc-3", "text": texts[3], "id": None}


@pytest.mark.parametrize("kind", ["raw", "zstd"])
def test_packed_stream_resumes_at_every_step(mds_dirs, texts, kind):
    from transformers import AutoTokenizer

    documents = list(Dataset.from_mds(mds_dirs[kind]).tokenize(TOKENIZER))
    reference = AutoTokenizer.from_pretrained(TOKENIZER)
    assert [reference.decode(d["input_ids"]) for d in documents] == texts
    report = check_resumption(lambda: packed(Dataset.from_mds(mds_dirs[kind])).batch(3))
    assert report.total_items > 10 and len(report.steps_checked) == report.total_items + 1


def test_resume_seeks_to_the_sample(tmp_path, texts):
    """A state past a sample resumes without reading it: spoil that sample's bytes on disk and
    the resumed stream still runs, while a fresh one stops at it naming the file and sample."""
    out = write_mds(tmp_path / "d", texts[:20], size_limit=1 << 20)
    (shard,) = Dataset.from_mds(out).shards
    it = Dataset.from_mds(out).iter()
    head = [next(it) for _ in range(3)]
    state = it.state_dict()
    data = bytearray(Path(shard.url).read_bytes())
    count = int.from_bytes(data[:4], "little")
    text_at = data.find(head[0]["text"].encode())
    assert count == 20 and 4 * 22 < text_at < int.from_bytes(data[8:12], "little")  # inside sample 0
    data[text_at : text_at + 2] = b"\xff\xfe"
    Path(shard.url).write_bytes(bytes(data))
    rest = list(Dataset.from_mds(out).iter(state))
    assert [r["text"] for r in rest] == texts[3:20]
    with pytest.raises(InputError, match=r"shard\.00000\.mds.*sample 0.*UTF-8"):
        list(Dataset.from_mds(out))
    skipping = Dataset.from_mds(out, on_error="skip").iter()
    assert len(list(skipping)) == 19 and skipping.stats()["documents"]["skipped"] == {"invalid_utf8": 1}


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_cli_cache_of_an_mds_dataset_is_the_stream(tmp_path, mds_dirs):
    out = tmp_path / "cache"
    cmd = [sys.executable, "-m", "beamtok._src.cli", "cache", "--mds", str(mds_dirs["zstd"]), "--output", str(out)]
    cmd += ["--tokenizer", TOKENIZER, "--seq-len", "64", "-q"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["documents"]["read"] == 80
    check_equivalent(
        lambda: Dataset.from_cache(str(out)).batch(2), lambda: packed(Dataset.from_mds(mds_dirs["zstd"])).batch(2)
    )
    both = subprocess.run([*cmd, "extra.jsonl"], capture_output=True, text=True, timeout=600)
    assert both.returncode != 0 and "either URL arguments or --mds" in both.stderr
    assert "Traceback" not in both.stderr


def test_split_subdirectory(tmp_path, texts):
    write_mds(tmp_path / "ds" / "train", texts[:10])
    write_mds(tmp_path / "ds" / "val", texts[10:14])
    assert [r["text"] for r in Dataset.from_mds(tmp_path / "ds", split="val")] == texts[10:14]
    assert [r["text"] for r in Dataset.from_mds(tmp_path / "ds" / "train" / "index.json")] == texts[:10]
    with pytest.raises(InputError, match=r"ds/test/index\.json.*no MDS index"):
        Dataset.from_mds(tmp_path / "ds", split="test")


def test_s3_dataset_equals_local_and_resumes(s3_bucket, mds_dirs, texts):
    for kind in ("raw", "zstd"):
        for path in sorted(mds_dirs[kind].iterdir()):
            s3_bucket.upload_file(str(path), "corpus", f"mds/{kind}/{path.name}")
    for kind in ("raw", "zstd"):
        remote = lambda: packed(Dataset.from_mds(f"s3://corpus/mds/{kind}")).batch(2)  # noqa: E731
        assert_items_equal(list(remote()), list(packed(Dataset.from_mds(mds_dirs[kind])).batch(2)))
        check_resumption(remote, steps=[1, 9])


def test_mistakes_name_the_file(tmp_path, texts):
    with mds_writer()(out=str(tmp_path / "pickled"), columns={"text": "str", "extra": "pkl"}) as writer:
        writer.write({"text": texts[0], "extra": {"x": 1}})
    with pytest.raises(InputError, match=r"shard\.00000\.mds: column 'extra' is pickled"):
        list(Dataset.from_mds(tmp_path / "pickled"))
    assert [r["text"] for r in Dataset.from_mds(tmp_path / "pickled", columns=["text"])] == texts[:1]
    out = write_mds(tmp_path / "d", texts[:6], size_limit=1 << 20)
    with pytest.raises(InputError, match=r"no column\(s\) \['body'\]"):
        list(Dataset.from_mds(out, columns=["body"]))
    index = json.loads((out / "index.json").read_text())
    index["shards"][0]["samples"] = 7
    (out / "index.json").write_text(json.dumps(index))
    with pytest.raises(InputError, match=r"shard\.00000\.mds: shard holds 6 samples by its header, index\.json says 7"):
        list(Dataset.from_mds(out))
    with pytest.raises(InputError, match=r"no MDS index"):
        Dataset.from_mds(tmp_path / "nowhere")
    (tmp_path / "x.bin").write_bytes(b"data")
    with pytest.raises(ConfigError, match=r"x\.bin: cannot tell the format.*'mds'"):
        list(Dataset.from_files(str(tmp_path / "x.bin")))


def test_truncated_shard_is_counted_when_skipping(tmp_path, texts):
    out = write_mds(tmp_path / "d", texts[:10], size_limit=1 << 20)
    shard = out / "shard.00000.mds"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 40])
    it = Dataset.from_mds(out, on_error="skip").iter()
    got = [r["text"] for r in it]
    assert got == texts[:9] and it.stats()["documents"]["skipped"] == {"truncated_file": 1}
    with pytest.raises(InputError, match=r"shard\.00000\.mds.*sample 9.*truncated"):
        list(Dataset.from_mds(out))


def test_sample_whose_column_sizes_do_not_fit_is_refused(tmp_path, texts):
    out = write_mds(tmp_path / "d", texts[:5], size_limit=1 << 20)
    shard = out / "shard.00000.mds"
    data = bytearray(shard.read_bytes())
    sample_2 = int.from_bytes(data[4 * 3 : 4 * 4], "little")
    data[sample_2 : sample_2 + 4] = (10**6).to_bytes(4, "little")  # the first size word
    shard.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"shard\.00000\.mds.*sample 2.*column sizes add up to"):
        list(Dataset.from_mds(out))
    it = Dataset.from_mds(out, on_error="skip").iter()
    assert [r["text"] for r in it] == [texts[i] for i in (0, 1, 3, 4)]


def test_an_unknown_encoding_is_named_where_its_column_is_needed_and_the_index_version_is_checked(tmp_path, texts):
    out = write_mds(tmp_path / "d", texts[:4], size_limit=1 << 20)
    index = json.loads((out / "index.json").read_text())
    index["shards"][0]["column_encodings"][index["shards"][0]["column_names"].index("text")] = (
        "str16"  # no decoder for it
    )
    (out / "index.json").write_text(json.dumps(index))
    with pytest.raises(
        InputError,
        match=r"no field 'text' \(fields: .*\): column 'text' has MDS encoding 'str16', which beamtok does not decode",
    ):
        list(Dataset.from_mds(out).tokenize(TOKENIZER))
    assert [r["source"] for r in Dataset.from_mds(out)] == [f"doc-{i}" for i in range(4)]  # the other columns read on
    index["version"] = 3
    (out / "index.json").write_text(json.dumps(index))
    with pytest.raises(InputError, match=r"index\.json: MDS index version 3; beamtok reads index version 2"):
        list(Dataset.from_mds(out))

"""Caches on an S3-compatible server (moto) on 127.0.0.1: built there, read back, a build killed
mid-write and re-run, and one credentials chain for inputs and caches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beamtok import Dataset
from beamtok._src.cache.format.object_store import s3_filesystem
from beamtok._src.cache.read.verify import verify_cache
from beamtok.testing import check_equivalent

from conftest import CORPUS, ROOT, shakespeare_copies

pytest.importorskip("apache_beam")
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


def keys(client, prefix: str) -> list[str]:
    found = client.list_objects_v2(Bucket="corpus", Prefix=prefix).get("Contents", [])
    return sorted(o["Key"] for o in found)


def online(inputs: list[str]) -> Dataset:
    return Dataset.from_files(inputs).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(1024)


@pytest.fixture
def inputs(s3_bucket, tmp_path) -> list[str]:
    """Three local 4 MB files (a build of a few seconds) and one input on the server."""
    paths = shakespeare_copies(tmp_path, 3)
    s3_bucket.upload_file(str(CORPUS / "pydocs-01.jsonl.zst"), "corpus", "in/pydocs-01.jsonl.zst")
    return [*paths, "s3://corpus/in/pydocs-01.jsonl.zst"]


def test_cache_on_s3_killed_mid_write_then_completed(s3_bucket, inputs):
    out = "s3://corpus/caches/c"
    cmd = [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        *inputs,
        "--output",
        out,
        "--tokenizer",
        TOKENIZER,
        "--seq-len",
        "1024",
        "-q",
    ]
    cmd += ["--split-bytes", "1MB"]  # ranges go through the bucket too
    build = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not any(k.endswith(".json") for k in keys(s3_bucket, "caches/c/records/")) and build.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert build.poll() is None, "the build finished before it could be killed: make the inputs bigger"
    build.send_signal(signal.SIGKILL)
    build.wait(60)
    written = keys(s3_bucket, "caches/c/")
    assert "caches/c/manifest.json" not in written and "caches/c/build.lock" in written
    fs = s3_filesystem()
    for key in written:  # an object under a final name is whole: uploads appear complete or not at all
        if key.endswith(".parquet"):
            pq.ParquetFile(fs.open_input_file(f"corpus/{key}")).metadata  # noqa: B018
        elif key.endswith(".arrow"):
            pa.ipc.open_stream(fs.open_input_file(f"corpus/{key}")).read_all()
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr  # the killed run's lock: its process is gone
    assert "caches/c/build.lock" not in keys(s3_bucket, "caches/c/")
    assert not keys(s3_bucket, "caches/c/shards/ranges/")
    verify_cache(out, sample=1)
    check_equivalent(lambda: Dataset.from_cache(out).batch(4), lambda: online(inputs).batch(4), random_steps=2)


def test_inputs_and_caches_share_one_credentials_chain(s3_bucket, monkeypatch, tmp_path):
    """The endpoint and keys come from an AWS profile in a config file, as boto3 reads it (the
    AWS C++ SDK pyarrow uses alone does not read a profile's endpoint_url)."""
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    config = tmp_path / "aws-config"
    config.write_text(f"[profile lab]\nendpoint_url = {endpoint}\nregion = us-east-1\n")
    credentials = tmp_path / "aws-credentials"
    credentials.write_text("[lab]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_PROFILE", "lab")
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # made by the fixture's client, before this profile existed
    s3_bucket.upload_file(str(CORPUS / "shakespeare-00.jsonl"), "corpus", "profile/in.jsonl")
    ds = Dataset.from_files("s3://corpus/profile/in.jsonl").tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(512)
    cached = ds.cache("s3://corpus/profile/cache", progress=False)
    assert "profile/cache/manifest.json" in keys(s3_bucket, "profile/cache/")
    check_equivalent(lambda: cached.batch(2), lambda: ds.batch(2), random_steps=3)

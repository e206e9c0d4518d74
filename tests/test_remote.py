"""Remote reads through smart-open: a Range-capable HTTP server and an S3 server on 127.0.0.1."""

from __future__ import annotations

import os
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from beamtok import Dataset, InputError
from beamtok.testing import check_resumption, items_equal

from conftest import CORPUS


class RangeHandler(SimpleHTTPRequestHandler):
    """Serves files with HTTP Range support, so readers can seek to a byte cursor."""

    ranges_served: ClassVar[list[str]] = []

    def log_message(self, *args):  # keep test output clean
        pass

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return None
        size = path.stat().st_size
        start, end = 0, size - 1
        match = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        f = open(path, "rb")
        if match:
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else size - 1
            RangeHandler.ranges_served.append(self.headers["Range"])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        f.seek(start)
        return _Limited(f, end - start + 1)


class _Limited:
    def __init__(self, f, n):
        self.f, self.n = f, n

    def read(self, size=-1):
        size = self.n if size < 0 else min(size, self.n)
        data = self.f.read(size)
        self.n -= len(data)
        return data

    def close(self):
        self.f.close()


@pytest.fixture
def http_root(tmp_path, make_shards):
    paths = make_shards(3, docs_per_shard=8)
    handler = lambda *a, **kw: RangeHandler(*a, directory=str(tmp_path), **kw)  # noqa: E731
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", paths
    server.shutdown()
    server.server_close()


def test_http_stream_equals_local_and_resumes_by_seeking(http_root, tokenizer_dir):
    base_url, paths = http_root
    remote = lambda: Dataset.from_files(base_url + "/part-{00..02}.jsonl").tokenize(tokenizer_dir).concat_chunk(24).batch(2)  # noqa: E731
    local = Dataset.from_files(paths).tokenize(tokenizer_dir).concat_chunk(24).batch(2)
    got, want = list(remote()), list(local)
    assert len(got) == len(want) and all(items_equal(a, b) for a, b in zip(got, want))
    RangeHandler.ranges_served.clear()
    check_resumption(remote, steps=[3, 9])
    assert any(r != "bytes=0-" for r in RangeHandler.ranges_served)  # resumed by a ranged read


def test_http_missing_file_is_a_clear_error(http_root, tokenizer_dir):
    base_url, _ = http_root
    ds = Dataset.from_files(base_url + "/nope.jsonl").tokenize(tokenizer_dir)
    with pytest.raises(InputError, match=r"nope\.jsonl"):
        list(ds)


def test_s3_shards_read_compressed_and_plain(s3_bucket, tokenizer_dir):
    names = ["shakespeare-00.jsonl", "shakespeare-05.jsonl.gz", "pydocs-00.jsonl.zst"]
    for name in names:
        s3_bucket.upload_file(str(CORPUS / name), "corpus", f"train/{name}")
    remote = lambda: Dataset.from_files([f"s3://corpus/train/{n}" for n in names]).tokenize(tokenizer_dir).concat_chunk(512).take(60)  # noqa: E731
    local = Dataset.from_files([str(CORPUS / n) for n in names]).tokenize(tokenizer_dir).concat_chunk(512).take(60)
    got, want = list(remote()), list(local)
    assert len(got) == 60 and all(items_equal(a, b) for a, b in zip(got, want))
    check_resumption(remote, steps=[7, 41])
    with pytest.raises(InputError, match=r"s3://corpus/train/missing\.jsonl"):
        list(Dataset.from_files("s3://corpus/train/missing.jsonl"))
    assert os.environ["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1")

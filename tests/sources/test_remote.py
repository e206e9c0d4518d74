"""Remote reads through smart-open: a Range-capable HTTP server and an S3 server on 127.0.0.1."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from beamtok import Dataset, InputError
from beamtok.testing import check_resumption, items_equal

from conftest import CORPUS, free_port


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


def serve(directory, handler_class):
    """An HTTP server on 127.0.0.1 serving ``directory`` with ``handler_class``, running until the generator resumes."""
    handler = lambda *a, **kw: handler_class(*a, directory=str(directory), **kw)  # noqa: E731
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def http_root(tmp_path, make_shards):
    paths = make_shards(3, docs_per_shard=8)
    for base_url in serve(tmp_path, RangeHandler):
        yield base_url, paths


def test_http_stream_equals_local_and_resumes_by_seeking(http_root, tokenizer_dir):
    base_url, paths = http_root
    remote = lambda: (  # noqa: E731
        Dataset.from_files(base_url + "/part-{00..02}.jsonl").tokenize(tokenizer_dir).concat_chunk(24).batch(2)
    )
    local = Dataset.from_files(paths).tokenize(tokenizer_dir).concat_chunk(24).batch(2)
    got, want = list(remote()), list(local)
    assert len(got) == len(want) and all(items_equal(a, b) for a, b in zip(got, want))
    RangeHandler.ranges_served.clear()
    check_resumption(remote, steps=[3, 9])
    assert any(r != "bytes=0-" for r in RangeHandler.ranges_served)  # resumed by a ranged read


class FlakyHandler(RangeHandler):
    """Fails on purpose, by file: the first GET is a 503, the second a 429, the third sends half
    the body and drops the connection; later GETs are served (ranged where asked). A file named
    ``down-*`` always answers 503."""

    gets: ClassVar[dict[str, int]] = {}

    def do_GET(self):
        count = FlakyHandler.gets[self.path] = FlakyHandler.gets.get(self.path, 0) + 1
        if "down-" in self.path or count == 1:
            self.send_error(503)
            return
        if count == 2:
            self.send_error(429)
            return
        if count == 3:
            body = self.send_head()
            if body is None:
                return
            data = body.read()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)  # mid-body: the reader sees the body cut short
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def flaky_root(tmp_path, make_shards, monkeypatch):
    from beamtok._src.sources import retrying

    monkeypatch.setattr(retrying, "BACKOFF_SECONDS", 0.01)  # the schedule doubles from here
    monkeypatch.setattr(retrying, "READ_BYTES", 256)  # several reads per file, so a cut comes after some
    paths = make_shards(3, docs_per_shard=8)
    FlakyHandler.gets.clear()
    for base_url in serve(tmp_path, FlakyHandler):
        yield base_url, paths


def test_transient_http_failures_are_retried_from_the_byte_reached(flaky_root, tokenizer_dir):
    base_url, paths = flaky_root
    remote = Dataset.from_files(base_url + "/part-{00..02}.jsonl").tokenize(tokenizer_dir).concat_chunk(24).batch(2)
    local = Dataset.from_files(paths).tokenize(tokenizer_dir).concat_chunk(24).batch(2)
    RangeHandler.ranges_served.clear()
    it = remote.iter()
    before = it.stats()["remote_retries"]
    got = list(it)
    want = list(local)
    assert len(got) == len(want) and all(items_equal(a, b) for a, b in zip(got, want))  # nothing lost, nothing twice
    assert it.stats()["remote_retries"] - before == 3 * 3  # a 503, a 429 and a cut body, per file
    assert all(FlakyHandler.gets[f"/part-{i:02d}.jsonl"] >= 4 for i in range(3))
    assert len([r for r in RangeHandler.ranges_served if r != "bytes=0-"]) == 3  # each cut body resumed where it broke


def test_a_server_that_stays_down_is_one_error_after_the_retries(flaky_root, tokenizer_dir):
    base_url, paths = flaky_root
    (Path(paths[0]).parent / "down-0.jsonl").write_text('{"text": "never served"}\n')
    with pytest.raises(InputError, match=r"down-0\.jsonl: .*still failing after 5 retries at byte 0: HTTPError: 503"):
        list(Dataset.from_files(base_url + "/down-0.jsonl").tokenize(tokenizer_dir))
    assert FlakyHandler.gets["/down-0.jsonl"] == 6


def test_http_missing_file_is_a_clear_error(http_root, tokenizer_dir):
    base_url, _ = http_root
    ds = Dataset.from_files(base_url + "/nope.jsonl").tokenize(tokenizer_dir)
    with pytest.raises(InputError, match=r"nope\.jsonl"):
        list(ds)


def test_s3_shards_read_compressed_and_plain(s3_bucket, tokenizer_dir):
    names = ["shakespeare-00.jsonl", "shakespeare-05.jsonl.gz", "pydocs-00.jsonl.zst"]
    for name in names:
        s3_bucket.upload_file(str(CORPUS / name), "corpus", f"train/{name}")
    remote = lambda: (  # noqa: E731
        Dataset.from_files([f"s3://corpus/train/{n}" for n in names]).tokenize(tokenizer_dir).concat_chunk(512).take(60)
    )
    local = Dataset.from_files([str(CORPUS / n) for n in names]).tokenize(tokenizer_dir).concat_chunk(512).take(60)
    got, want = list(remote()), list(local)
    assert len(got) == 60 and all(items_equal(a, b) for a, b in zip(got, want))
    check_resumption(remote, steps=[7, 41])
    with pytest.raises(InputError, match=r"s3://corpus/train/missing\.jsonl"):
        list(Dataset.from_files("s3://corpus/train/missing.jsonl"))
    assert os.environ["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1")


def test_a_server_without_range_support_resumes_by_reading_forward_and_exits_quietly(
    tmp_path, make_shards, tokenizer_dir
):
    """``python -m http.server`` ignores Range requests: a resume reads forward to the cursor,
    said once, and the process exits with nothing printed after it (a stream's generator
    finalized at exit used to log through a torn-down logging module)."""
    make_shards(2, docs_per_shard=8)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "http.server did not start"
                time.sleep(0.05)
        script = f"""
import json, warnings
from beamtok import Dataset
ds = Dataset.from_files("http://127.0.0.1:{port}/part-{{00..01}}.jsonl").tokenize({tokenizer_dir!r}).concat_chunk(24)
it = ds.iter()
first = [next(it) for _ in range(5)]
state = json.loads(json.dumps(it.state_dict()))
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    resumed = list(ds.iter(state))
rest = list(it)
assert [r["index"] for r in resumed] == [r["index"] for r in rest], "resumed stream differs"
print(len(resumed), sum("ignores HTTP Range requests" in str(w.message) for w in said))
half = ds.iter()
next(half)  # a generator left open: finalized at exit
"""
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    finally:
        server.kill()
    assert done.returncode == 0, done.stderr
    count, warned = map(int, done.stdout.split())
    assert count > 0 and warned == 1
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr

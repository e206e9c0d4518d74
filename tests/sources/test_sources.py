"""URL expansion and readers: formats, doc cursors that seek, and errors naming file and line."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from beamtok import ConfigError, InputError, StateError
from beamtok._src.core.spec import SourceSpec
from beamtok._src.sources.documents import ParseFailure
from beamtok._src.sources.readers import read_documents
from beamtok.extend import Shard, expand_urls

from conftest import CORPUS, write_jsonl


def docs(url: str, start: int = 0, fmt: str = "auto", **kw) -> list:
    return list(read_documents(Shard(0, url), SourceSpec(fmt, **kw), start))


def test_brace_patterns_keep_order_and_drop_duplicates():
    urls = expand_urls([str(CORPUS / "shakespeare-{03,00}.jsonl"), str(CORPUS / "shakespeare-{00..02}.jsonl")])
    assert [Path(u).name for u in urls] == [f"shakespeare-{i:02d}.jsonl" for i in (3, 0, 1, 2)]


def test_local_globs_are_sorted():
    urls = expand_urls(str(CORPUS / "shakespeare-*.jsonl*"))
    assert urls == sorted(urls) and len(urls) == 6


def test_remote_urls_pass_through_brace_expansion():
    assert expand_urls("s3://bucket/train.{0..2}.jsonl") == [f"s3://bucket/train.{i}.jsonl" for i in range(3)]


def test_missing_file_and_empty_glob_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match=r"nope\.jsonl: file not found"):
        expand_urls(str(tmp_path / "nope.jsonl"))
    with pytest.raises(InputError, match="pattern matches no file"):
        expand_urls(str(tmp_path / "*.jsonl"))
    with pytest.raises(InputError, match="is a directory"):
        expand_urls(str(tmp_path))


def test_jsonl_cursor_is_a_byte_offset_that_seeks(tmp_path, paragraphs):
    path = write_jsonl(tmp_path / "a.jsonl", [{"text": t} for t in paragraphs(20)])
    full = docs(str(path))
    assert full[0].cursor == 0 and full[0].location == "line 1"
    raw = path.read_bytes()
    for d in full:
        assert raw[d.cursor :].startswith(b'{"text"')
    tail = docs(str(path), start=full[7].cursor)
    assert [d.payload for d in tail] == [d.payload for d in full[7:]]
    assert tail[0].location == f"byte {full[7].cursor}"


@pytest.mark.parametrize("compression", ["gz", "zst"])
def test_compressed_jsonl_cursor_is_a_line_number(tmp_path, paragraphs, compression):
    records = [{"text": t} for t in paragraphs(20)]
    path = write_jsonl(tmp_path / f"a.jsonl.{compression}", records, compression)
    full = docs(str(path))
    assert [d.payload for d in full] == records
    assert [d.cursor for d in full] == list(range(20))
    assert [d.payload for d in docs(str(path), start=13)] == records[13:]


def test_shipped_compressed_shards_read(tmp_path):
    gz = docs(str(CORPUS / "shakespeare-04.jsonl.gz"))
    zst = docs(str(CORPUS / "pydocs-00.jsonl.zst"))
    assert len(gz) > 10 and all(isinstance(d.payload["text"], str) for d in gz)
    assert len(zst) == 16 and "Python" in zst[0].payload["text"] + zst[1].payload["text"]


def test_parquet_cursor_is_a_row_that_seeks_to_its_row_group(tmp_path, paragraphs):
    texts = paragraphs(50)
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": texts, "id": list(range(50))}), path, row_group_size=8)
    full = docs(str(path))
    assert [d.payload["text"] for d in full] == texts and full[3].location == "row 3"
    for start in (0, 7, 8, 9, 31, 49, 50):
        assert [d.payload["id"] for d in docs(str(path), start=start)] == list(range(start, 50))
    only = docs(str(path), columns=("text",))
    assert set(only[0].payload) == {"text"}
    with pytest.raises(InputError, match="no column"):
        docs(str(path), columns=("body",))


def test_plain_text_file_is_one_document():
    (doc,) = docs(str(CORPUS / "milton" / "comus.txt"))
    assert doc.cursor == 0 and "COMUS" in doc.payload["text"].upper()
    with pytest.raises(StateError, match="past the end of a plain text file"):
        docs(str(CORPUS / "milton" / "comus.txt"), start=1)


def test_undetectable_format_is_a_config_error(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(b"x")
    with pytest.raises(ConfigError, match="pass format="):
        docs(str(path))


def test_bad_lines_become_parse_failures(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", ['{"text": "ok"}', "{broken", "[1, 2]", '"just a string"'])
    path.write_bytes(path.read_bytes() + b'{"text": "\xff\xfe"}\n')
    reasons = [d.payload.reason if isinstance(d.payload, ParseFailure) else "ok" for d in docs(str(path))]
    assert reasons == ["ok", "malformed_json", "not_an_object", "not_an_object", "invalid_utf8"]


def test_blank_lines_are_not_documents(tmp_path):
    path = tmp_path / "blank.jsonl"
    path.write_bytes(b'{"text": "a"}\n\n   \n{"text": "b"}')
    assert [d.payload["text"] for d in docs(str(path))] == ["a", "b"]


def test_truncated_gzip_is_reported(tmp_path, paragraphs):
    path = write_jsonl(tmp_path / "t.jsonl.gz", [{"text": t} for t in paragraphs(200)], "gz")
    path.write_bytes(path.read_bytes()[: os.path.getsize(path) // 2])
    read = docs(str(path))  # the documents before the break, then the break as a failure
    assert all(isinstance(d.payload, dict) for d in read[:-1]) and len(read) > 10
    assert read[-1].payload.reason == "truncated_file" and "truncated or corrupt" in read[-1].payload.message


def test_hf_dataset_rows_read_in_slices(paragraphs):
    datasets = pytest.importorskip("datasets")
    texts = paragraphs(30)
    hf = datasets.Dataset.from_dict({"text": texts, "n": list(range(30))})
    got = list(read_documents(Shard(0, "memory://hf", hf), SourceSpec("memory"), 11))
    assert [d.payload["n"] for d in got] == list(range(11, 30))


def test_local_files_open_without_the_remote_clients(tmp_path):
    """Local shards (plain, compressed, file:// URLs) open without importing smart_open and
    the cloud clients it registers (a quarter of a second in every process); an unreadable
    local path is still a clear error."""
    import subprocess
    import sys

    gz = CORPUS / "shakespeare-04.jsonl.gz"
    plain = CORPUS / "shakespeare-00.jsonl"
    script = (
        "import sys\n"
        "from beamtok.extend import Shard\n"
        "from beamtok._src.sources.readers import read_documents\n"
        "from beamtok._src.core.spec import SourceSpec\n"
        f"for url in ({str(plain)!r}, {str(gz)!r}, {'file://' + str(plain)!r}):\n"
        "    assert next(read_documents(Shard(0, url), SourceSpec('auto'), 0)).payload\n"
        "print('smart_open' in sys.modules, 'botocore' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    with pytest.raises(InputError, match=r"folder\.jsonl: cannot open"):
        docs(str(folder))

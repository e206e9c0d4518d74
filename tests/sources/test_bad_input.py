"""The bad-input matrix: every kind of bad record, under both error policies.

Under ``on_error="raise"`` the stream stops with one error naming the file, the line or row
and the problem. Under ``"skip"`` the record is counted under its reason and everything else
comes out exactly as from a file without it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from beamtok import ConfigError, Dataset, InputError

from conftest import ROOT, real_paragraphs, write_jsonl

GOOD = [{"text": t} for t in real_paragraphs(6, start=40)]

# (name, raw JSONL line, reason it is counted under, what the raised error says)
BAD_LINES = [
    ("malformed JSON", '{"text": "unterminated', "malformed_json", "malformed JSON"),
    ("a JSON array", "[1, 2, 3]", "not_an_object", "expected a JSON object, got list"),
    ("a JSON string", '"just a string"', "not_an_object", "expected a JSON object, got str"),
    ("a JSON number", "42", "not_an_object", "expected a JSON object, got int"),
    ("no text field", '{"body": "text under another name"}', "missing_field", "no field 'text'"),
    ("text is null", '{"text": null}', "wrong_type", "field 'text' is NoneType, expected a string"),
    ("text is a number", '{"text": 3.5}', "wrong_type", "field 'text' is float, expected a string"),
    ("text is a list", '{"text": ["a", "b"]}', "wrong_type", "field 'text' is list, expected a string"),
]


def pipeline(paths: Any, tokenizer_dir: str, on_error: str, engine: str = "tokenizers") -> Dataset:
    return (
        Dataset.from_files(paths, on_error=on_error)
        .tokenize(tokenizer_dir, engine=engine)
        .ensure_bos_eos()
        .concat_chunk(64)
    )


def stream(paths: Any, tokenizer_dir: str, on_error: str) -> tuple[list[np.ndarray], dict[str, Any]]:
    it = pipeline(paths, tokenizer_dir, on_error).iter()
    rows = [ex["input_ids"] for ex in it]
    return rows, it.stats()


def same_rows(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def clean(tmp_path_factory, tokenizer_dir):
    """The stream of the good documents alone: what every skip run must reproduce."""
    path = write_jsonl(tmp_path_factory.mktemp("clean") / "clean.jsonl", GOOD)
    return stream(str(path), tokenizer_dir, "raise")


@pytest.mark.parametrize(("name", "line", "reason", "message"), BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_bad_jsonl_record(tmp_path, tokenizer_dir, clean, name, line, reason, message):
    path = write_jsonl(tmp_path / "mixed.jsonl", [*GOOD[:3], line, *GOOD[3:]])
    with pytest.raises(InputError) as raised:
        stream(str(path), tokenizer_dir, "raise")
    assert str(raised.value).startswith(f"{path}: line 4: ")
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)

    rows, stats = stream(str(path), tokenizer_dir, "skip")
    assert same_rows(rows, clean[0])
    assert stats["documents"]["read"] == len(GOOD) + 1
    assert stats["documents"]["emitted"] == len(GOOD)
    assert stats["documents"]["skipped"] == {reason: 1}


def test_invalid_utf8(tmp_path, tokenizer_dir, clean):
    path = tmp_path / "bytes.jsonl"
    lines = [json.dumps(d).encode() for d in GOOD]
    lines.insert(2, b'{"text": "caf\xe9 latin-1, not UTF-8"}')
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError, match=r"bytes\.jsonl: line 3: invalid UTF-8 at byte 13 of the line"):
        stream(str(path), tokenizer_dir, "raise")
    rows, stats = stream(str(path), tokenizer_dir, "skip")
    assert same_rows(rows, clean[0])
    assert stats["documents"]["skipped"] == {"invalid_utf8": 1}


def test_invalid_utf8_plain_text_file(tmp_path, tokenizer_dir):
    good, bad = tmp_path / "a.txt", tmp_path / "b.txt"
    good.write_text(GOOD[0]["text"], encoding="utf-8")
    bad.write_bytes(b"\xff\xfe not text")
    with pytest.raises(InputError, match=r"b\.txt: document: invalid UTF-8 at byte 0"):
        stream([str(good), str(bad)], tokenizer_dir, "raise")
    rows, stats = stream([str(good), str(bad)], tokenizer_dir, "skip")
    assert same_rows(rows, stream(str(good), tokenizer_dir, "raise")[0])
    assert stats["documents"] == {**stats["documents"], "read": 2, "emitted": 1, "skipped": {"invalid_utf8": 1}}


def test_empty_document_is_a_counted_skip_under_both_policies(tmp_path, tokenizer_dir, clean):
    path = write_jsonl(tmp_path / "empty-doc.jsonl", [*GOOD[:2], {"text": ""}, *GOOD[2:]])
    for on_error in ("raise", "skip"):
        rows, stats = stream(str(path), tokenizer_dir, on_error)
        assert same_rows(rows, clean[0])
        assert stats["documents"]["skipped"] == {"empty": 1}


def test_empty_file_between_good_ones(tmp_path, tokenizer_dir):
    a = write_jsonl(tmp_path / "a.jsonl", GOOD[:3])
    (tmp_path / "b.jsonl").write_bytes(b"")
    c = write_jsonl(tmp_path / "c.jsonl", GOOD[3:])
    for on_error in ("raise", "skip"):
        rows, stats = stream([str(a), str(tmp_path / "b.jsonl"), str(c)], tokenizer_dir, on_error)
        assert same_rows(rows, stream([str(a), str(c)], tokenizer_dir, "raise")[0])
        assert stats["documents"]["read"] == len(GOOD) and not stats["documents"]["skipped"]


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_fifty_megabyte_single_line(tmp_path, tokenizer_dir, gpt2):
    """One 50 MB document is one document: read, chunked, every token accounted for.
    (Tokenized through the exact tiktoken backend, proven identical to HF elsewhere, to keep
    CI fast: the subject here is the line, not the tokenizer.)"""
    sentence = "The quick brown fox jumps over the lazy dog, and then it naps. "
    text = sentence * (50_000_000 // len(sentence) + 1)
    path = write_jsonl(tmp_path / "huge.jsonl", [GOOD[0], {"text": text}, GOOD[1]])
    assert path.stat().st_size > 50_000_000
    # the text's tokens without encoding 50 MB once more: a sentence more adds the same tokens
    n1, n2, n3 = (len(gpt2.encode_batch([sentence * m], engine="exact")[0]) for m in (1, 2, 3))
    assert n3 - n2 == n2 - n1
    repeats = len(text) // len(sentence)
    want = (
        n1
        + (repeats - 1) * (n2 - n1)
        + 2
        + sum(len(ids) + 2 for ids in gpt2.encode_batch([GOOD[0]["text"], GOOD[1]["text"]], engine="exact"))
    )
    for on_error in ("raise", "skip"):
        it = pipeline(str(path), tokenizer_dir, on_error, engine="exact").iter()
        rows = sum(1 for _ in it)
        stats = it.stats()
        assert stats["documents"] == {**stats["documents"], "read": 3, "emitted": 3, "skipped": {}}
        assert stats["tokens"] == want - stats["documents"]["dropped_tokens"]
        assert rows == -(-want // 64)  # the last partial row is padded


@pytest.mark.parametrize("compression", ["gz", "zst"])
def test_truncated_compressed_file(tmp_path, tokenizer_dir, compression):
    docs = [{"text": t} for t in real_paragraphs(200, start=100)]
    lines = [json.dumps(d).encode() + b"\n" for d in docs]
    if compression == "gz":
        data = gzip.compress(b"".join(lines), mtime=0)
    else:  # one frame per 20 lines, as streaming writers produce: a cut keeps whole frames
        data = b"".join(
            zstandard.ZstdCompressor().compress(b"".join(lines[i : i + 20])) for i in range(0, len(lines), 20)
        )
    cut = tmp_path / f"cut.jsonl.{compression}"
    cut.write_bytes(data[: len(data) * 2 // 3])
    if compression == "gz":
        kept = sum(1 for _ in _complete_lines(gzip.GzipFile(cut)))
    else:
        kept = _zstd_complete_lines(cut.read_bytes())
    assert 0 < kept < len(docs)
    with pytest.raises(
        InputError, match=rf"cut\.jsonl\.{compression}: line {kept + 1}: compressed file is truncated or corrupt"
    ):
        stream(str(cut), tokenizer_dir, "raise")
    rows, stats = stream(str(cut), tokenizer_dir, "skip")
    before = write_jsonl(tmp_path / "before.jsonl", docs[:kept])
    assert same_rows(rows, stream(str(before), tokenizer_dir, "raise")[0])
    assert stats["documents"] == {
        **stats["documents"],
        "read": kept + 1,
        "emitted": kept,
        "skipped": {"truncated_file": 1},
    }


def _complete_lines(f: Any) -> Any:
    try:
        for line in f:
            if line.endswith(b"\n"):
                yield line
    except EOFError:
        return


def _zstd_complete_lines(data: bytes) -> int:
    """Lines in the complete frames of ``data``."""
    out, decompressor = b"", zstandard.ZstdDecompressor()
    while data:
        frame = decompressor.decompressobj()
        chunk = frame.decompress(data)
        if not frame.eof:
            break
        out += chunk
        data = frame.unused_data
    return out.count(b"\n")


def test_truncated_plain_text_gzip(tmp_path, tokenizer_dir):
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(gzip.compress(GOOD[0]["text"].encode() * 50)[:-40])
    with pytest.raises(InputError, match=r"cut\.txt\.gz: document: compressed file is truncated"):
        stream(str(path), tokenizer_dir, "raise")
    rows, stats = stream(str(path), tokenizer_dir, "skip")
    assert rows == [] and stats["documents"]["skipped"] == {"truncated_file": 1}


def test_parquet_with_the_wrong_schema(tmp_path, tokenizer_dir):
    path = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"body": ["x", "y", "z"]}), path)
    with pytest.raises(InputError, match=r"wrong\.parquet: row 0: no field 'text'"):
        stream(str(path), tokenizer_dir, "raise")
    rows, stats = stream(str(path), tokenizer_dir, "skip")
    assert rows == [] and stats["documents"] == {**stats["documents"], "read": 3, "skipped": {"missing_field": 3}}
    typed = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"text": pa.array([1, 2], pa.int64())}), typed)
    with pytest.raises(InputError, match=r"typed\.parquet: row 0: field 'text' is int"):
        stream(str(typed), tokenizer_dir, "raise")


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_missing_file_is_an_error_under_both_policies(tmp_path, tokenizer_dir, on_error):
    """A shard that cannot be opened is never skipped: that would lose a whole file silently."""
    good = write_jsonl(tmp_path / "good.jsonl", GOOD)
    with pytest.raises(InputError, match=r"gone\.jsonl: file not found"):
        stream([str(good), str(tmp_path / "gone.jsonl")], tokenizer_dir, on_error)


def test_pattern_that_expands_to_nothing(tmp_path):
    """Refused when the dataset is declared, before anything is read."""
    with pytest.raises(InputError, match=r"train-\*\.jsonl: pattern matches no file"):
        Dataset.from_files(str(tmp_path / "train-*.jsonl"))
    with pytest.raises(InputError, match=r"train-00\.jsonl\.gz: file not found"):
        Dataset.from_files(str(tmp_path / "train-{00..03}.jsonl.gz"))


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_file_without_read_permission(tmp_path, tokenizer_dir, on_error):
    shared = Path(tempfile.mkdtemp(prefix="beamtok-perm-"))  # reachable by the unprivileged user
    try:
        shared.chmod(0o755)
        locked = write_jsonl(shared / "locked.jsonl", GOOD)
        locked.chmod(0)
        readable = write_jsonl(tmp_path / "readable.jsonl", GOOD)
        message = _run_unprivileged(
            lambda: stream(str(locked), tokenizer_dir, on_error),
            warm=lambda: stream(str(readable), tokenizer_dir, on_error),
        )
    finally:
        shutil.rmtree(shared)
    assert message == f"InputError: {locked}: permission denied"


def _run_unprivileged(action: Any, warm: Any) -> str:
    """Run ``action`` where file permissions apply, and return its error as 'Type: message'.

    As root (CI), file modes do not stop reads, so the action runs in a forked child that
    has dropped to the ``nobody`` user; everything it needs is imported beforehand by ``warm``.
    """
    warm()
    if os.geteuid() != 0:
        try:
            action()
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        return "no error"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report the outcome through the pipe, never return into pytest
        os.close(read)
        try:
            os.setgid(65534)
            os.setuid(65534)
            action()
            out = "no error"
        except BaseException as e:
            out = f"{type(e).__name__}: {e}"
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return out


# ------------------------------------------------------------ invalid options


INVALID_OPTIONS = [
    ("seq_len 0", lambda ds: ds.concat_chunk(0), "seq_len must be"),
    ("seq_len negative", lambda ds: ds.concat_chunk(-8), "seq_len must be"),
    ("pad to 0", lambda ds: ds.pad(0), "seq_len must be"),
    ("window stride 0", lambda ds: ds.sliding_window(16, stride=0), "stride"),
    ("window stride > seq_len", lambda ds: ds.sliding_window(16, stride=17), "stride"),
    ("pack 0", lambda ds: ds.pack_examples(0), "seq_len must be"),
    ("batch 0", lambda ds: ds.concat_chunk(8).batch(0), "batch size"),
    ("shuffle window 0", lambda ds: ds.concat_chunk(8).shuffle(window=0), "window"),
    ("take negative", lambda ds: ds.concat_chunk(8).take(-1), "count must be"),
    ("interleave 0", lambda ds: ds.interleave(0), "open_shards must be"),
    ("workers negative", lambda ds: ds.parallel(-1), "workers"),
    ("repeat 0 epochs", lambda ds: ds.repeat(0), "epochs"),
]


@pytest.mark.parametrize(("name", "build", "message"), INVALID_OPTIONS, ids=[o[0] for o in INVALID_OPTIONS])
def test_invalid_options_are_rejected_before_any_work(tmp_path, tokenizer_dir, name, build, message):
    missing = str(tmp_path / "never-read.jsonl")  # would fail if anything tried to read it
    Path(missing).write_text("")
    ds = Dataset.from_files(missing).tokenize(tokenizer_dir)
    Path(missing).unlink()
    with pytest.raises(ConfigError, match=message):
        build(ds)


def test_unknown_error_policy(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", GOOD)
    with pytest.raises(ConfigError, match="on_error"):
        Dataset.from_files(str(path), on_error="ignore")


# ------------------------------------------------------------------- the CLI


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "beamtok._src.cli", *args], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_cli_errors_are_one_line_before_any_work(tmp_path, tokenizer_dir):
    bad = write_jsonl(tmp_path / "bad.jsonl", [GOOD[0], '{"text": ', GOOD[1]])
    out = tmp_path / "cache"
    cases = [
        ((str(bad), "-o", str(out), "--tokenizer", tokenizer_dir, "--seq-len", "0"), "seq_len must be"),
        (
            (str(tmp_path / "none-*.jsonl"), "-o", str(out), "--tokenizer", tokenizer_dir, "--seq-len", "8"),
            "pattern matches no file",
        ),
        (
            (str(bad), "-o", str(out), "--tokenizer", tokenizer_dir, "--seq-len", "8", "--on-error", "ignore"),
            "on-error",
        ),
        (
            (str(tmp_path / "gone.jsonl"), "-o", str(out), "--tokenizer", tokenizer_dir, "--seq-len", "8"),
            "gone.jsonl: file not found",
        ),
    ]
    for args, message in cases:
        proc = cli("cache", *args)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert message in last, proc.stderr
        assert not (out / "manifest.json").exists()


def test_cli_bad_record_names_file_and_line(tmp_path, tokenizer_dir):
    pytest.importorskip("apache_beam")
    bad = write_jsonl(tmp_path / "bad.jsonl", [GOOD[0], '{"text": ', GOOD[1]])
    proc = cli(
        "cache", str(bad), "-o", str(tmp_path / "cache"), "--tokenizer", tokenizer_dir, "--seq-len", "8", "--quiet"
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("beamtok: error: ") and f"{bad}: line 2: malformed JSON" in last, proc.stderr


# ------------------------------------------------------- accounting, both modes


def mixed_corpus(root: Path) -> tuple[list[str], dict[str, int], int]:
    """Shards with every kind of bad record among good ones; returns the paths, the skip
    counts a run must report and the number of documents read."""
    lines = [json.dumps(GOOD[0]), *(b[1] for b in BAD_LINES), json.dumps({"text": ""}), json.dumps(GOOD[1])]
    jsonl = root / "mixed.jsonl"
    jsonl.write_bytes(
        "\n".join(lines).encode() + b"\n" + b'{"text": "\xff"}\n' + json.dumps({"text": "\ud800 lone"}).encode() + b"\n"
    )
    full = gzip.compress("".join(json.dumps(d) + "\n" for d in GOOD * 40).encode(), mtime=0)
    (root / "cut.jsonl.gz").write_bytes(full[: len(full) // 2])
    kept = sum(1 for _ in _complete_lines(gzip.GzipFile(root / "cut.jsonl.gz")))
    pq.write_table(pa.table({"text": pa.array([GOOD[2]["text"], None, GOOD[3]["text"]])}), root / "rows.parquet")
    (root / "empty.jsonl").write_bytes(b"")
    (root / "latin1.txt").write_bytes(b"caf\xe9")
    skips = {
        "malformed_json": 1,
        "not_an_object": 3,
        "missing_field": 1,
        "wrong_type": 4,
        "empty": 1,
        "invalid_utf8": 3,
        "truncated_file": 1,
    }
    read = len(lines) + 2 + (kept + 1) + 3 + 0 + 1
    paths = [str(root / n) for n in ("mixed.jsonl", "cut.jsonl.gz", "rows.parquet", "empty.jsonl", "latin1.txt")]
    return paths, skips, read


def test_accounting_identity_in_both_modes(tmp_path, tokenizer_dir):
    pytest.importorskip("apache_beam")
    paths, skips, read = mixed_corpus(tmp_path)
    it = pipeline(paths, tokenizer_dir, "skip").iter()
    online = list(it)
    documents = it.stats()["documents"]
    assert documents["skipped"] == skips
    assert documents["read"] == read == documents["emitted"] + sum(skips.values())

    out = tmp_path / "cache"
    proc = cli(
        "cache", *paths, "-o", str(out), "--tokenizer", tokenizer_dir, "--seq-len", "64", "--on-error", "skip", "-v"
    )
    assert proc.returncode == 0, proc.stderr
    counters = json.loads(
        next(line for line in proc.stderr.splitlines() if line.startswith("beamtok: Beam counters ")).split(" ", 3)[3]
    )
    assert counters["documents"] == read and counters["emitted_documents"] == documents["emitted"]
    assert {
        k.removeprefix("skipped_"): v
        for k, v in counters.items()
        if k.startswith("skipped_") and k != "skipped_documents"
    } == skips
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["documents"] == {**manifest["totals"]["documents"], "read": read, "skipped": skips}
    cached = Dataset.from_cache(str(out)).iter()
    assert len(list(cached)) == len(online)
    assert cached.stats()["documents"] == documents

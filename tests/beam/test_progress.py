"""Progress displays and log levels: bars on terminals, plain lines elsewhere, quiet Beam."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from beamtok import Dataset
from beamtok._src.base.progress import Progress
from beamtok._src.cache.build.progress import BuildProgress, ShardReporter, shard_fraction
from beamtok._src.cache.build.writer import write_shard
from beamtok._src.cache.format.manifest import RECORDS_DIR
from beamtok._src.cache.format.storage import Storage
from beamtok._src.core.spec import SourceSpec
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.sources.urls import Shard

from conftest import CORPUS, ROOT, TOKENIZER_DIR, real_paragraphs, write_jsonl

TOKENIZER = str(TOKENIZER_DIR)


def test_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    progress = Progress(4, "cache", "shards", stream=out, interval=0)
    progress.REDRAW = 0
    progress.set(1, tokens="1,000")
    progress.close()
    progress.set(2)  # closed: nothing more
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("beamtok: cache: 1/4 shards (25%), tokens 1,000, ") and "left" in lines[0]
    assert lines[1].startswith("beamtok: cache: 1/4 shards (25%)")
    silent = io.StringIO()
    with Progress(4, "cache", "shards", stream=silent, enabled=False) as off:
        off.set(4)
    assert silent.getvalue() == ""


def test_bar_on_a_terminal():
    """A real pseudo-terminal (40 rows, 100 columns) gets a redrawn tqdm bar, not lines."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    code = (
        "import time\nfrom beamtok._src.base.progress import Progress\n"
        "p = Progress(4, 'cache', 'shards', interval=0)\n"
        "for i in range(5):\n    p.set(i, tokens=i * 10)\n    time.sleep(0.15)\np.close()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=follower, stdout=follower, stderr=follower, cwd=ROOT)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    assert child.wait() == 0
    text = shown.decode()
    assert "cache: 100%" in text and "4/4" in text and "tokens 40" in text
    assert text.count("\r") >= 3 and "beamtok: cache:" not in text  # redrawn in place, no plain lines


def test_fraction_of_a_shard_follows_its_doc_cursor(tmp_path):
    jsonl = CORPUS / "shakespeare-00.jsonl"
    fraction = shard_fraction(Shard(0, str(jsonl)), SourceSpec())
    assert fraction is not None and fraction(0) == 0 and fraction(jsonl.stat().st_size) == 1.0
    table = pa.table({"text": real_paragraphs(40)})
    pq.write_table(table, tmp_path / "p.parquet", row_group_size=7)
    rows = shard_fraction(Shard(0, str(tmp_path / "p.parquet")), SourceSpec())
    assert rows is not None and rows(10) == 10 / 40
    gz = write_jsonl(tmp_path / "x.jsonl.gz", [{"text": "a"}], compression="gz")
    assert shard_fraction(Shard(0, str(gz)), SourceSpec()) is None  # no measure inside compressed files


def test_worker_reports_reach_the_build_display(tmp_path):
    """write_shard reports its doc cursor; the reporter turns it into a rising fraction that
    ends at 1; the parent's figures add open shards' fractions to finished shards."""
    ds = Dataset.from_files([str(CORPUS / "shakespeare-00.jsonl")]).tokenize(TOKENIZER).concat_chunk(256)
    processor = ShardProcessor(ds.spec)
    processor.prepare()
    progress_dir = tmp_path / "progress"
    progress_dir.mkdir()
    reporter = ShardReporter(str(progress_dir), ds.shards[0], ds.spec.source, interval=0)
    seen: list[dict[str, float]] = []

    def report(*args: int) -> None:
        reporter(*args)
        seen.append(json.loads((progress_dir / "0.json").read_text()))

    storage = Storage(str(tmp_path / "cache"))
    entry = write_shard(storage, processor, ds.shards[0], 256, report=report)
    fractions = [r["fraction"] for r in seen]
    assert fractions == sorted(fractions) and fractions[0] < 0.1 and fractions[-1] == 1.0
    assert seen[-1]["tokens"] == entry.tokens and seen[-1]["rows"] == entry.rows
    assert seen[-1]["documents"] == entry.documents["read"]
    (progress_dir / "0.json").write_text(json.dumps({"fraction": 0.25, "tokens": 7, "rows": 1, "documents": 1}))
    (progress_dir / "1.json").write_text(json.dumps({"fraction": 0.5, "tokens": 5, "rows": 1, "documents": 1}))
    monitor = BuildProgress(storage, 3, str(progress_dir), enabled=False)
    assert monitor.figures() == (
        1.5,
        5,
    )  # shard 0 finished before the monitor started: counted done, its tokens not this run's
    (Path(storage.url) / RECORDS_DIR / "shard-00000.json").unlink()
    assert BuildProgress(storage, 3, str(progress_dir), enabled=False).figures() == (0.75, 12)


def _cache_cli(tmp_path: Path, *flags: str, workers: bool = True) -> subprocess.CompletedProcess[str]:
    """``beamtok cache`` of 60 paragraphs in two files with ``flags``; on two Beam worker
    processes (which log on their own; two files, so the build keeps both) unless ``workers``
    is false."""
    data, second = tmp_path / "in.jsonl", tmp_path / "in2.jsonl"
    if not data.exists():
        write_jsonl(data, [{"text": p} for p in real_paragraphs(30)])
        write_jsonl(second, [{"text": p} for p in real_paragraphs(30, start=30)])
    out = tmp_path / f"cache{len(list(tmp_path.iterdir()))}"
    command = [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        str(data),
        str(second),
        "-o",
        str(out),
        "--tokenizer",
        TOKENIZER,
        "--seq-len",
        "64",
    ]
    multi = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"] if workers else []
    return subprocess.run([*command, *multi, *flags], capture_output=True, text=True, cwd=ROOT)


def test_cli_log_levels_and_quiet_beam_workers(tmp_path):
    default = _cache_cli(tmp_path)
    assert default.returncode == 0, default.stderr
    assert default.stderr.splitlines() == [
        line for line in default.stderr.splitlines() if line.startswith("beamtok: cache: 2/2 shards (100%)")
    ]
    assert len(default.stderr.splitlines()) == 1  # Beam's worker processes log ~40 lines at INFO/WARNING
    chatty = _cache_cli(tmp_path, "-vv")
    assert chatty.returncode == 0 and "INFO:" in chatty.stderr and "sdk_worker" in chatty.stderr
    # the levels themselves, in one process: the workers' quieting is shown by the two above
    quiet = _cache_cli(tmp_path, "-q", workers=False)
    assert quiet.returncode == 0 and quiet.stderr == "" and "2 shards" in quiet.stdout
    debug = _cache_cli(tmp_path, "--log-level", "debug", workers=False)
    assert "beamtok: running the build of 2 shards" in debug.stderr and "Beam counters" in debug.stderr
    both = _cache_cli(tmp_path, "-q", "-v")
    assert (
        both.returncode == 2 and both.stderr.strip() == "beamtok: error: -q cannot be combined with -v or --log-level"
    )


def test_python_cache_shows_progress_unless_asked_not_to(tmp_path):
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": p} for p in real_paragraphs(30)])
    code = (
        "import sys\nfrom beamtok import Dataset\n"
        f"ds = Dataset.from_files([{str(data)!r}]).tokenize({TOKENIZER!r}).concat_chunk(64)\n"
        "ds.cache(sys.argv[1], progress=sys.argv[2] == 'on')\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "a"), "on"], capture_output=True, text=True, cwd=ROOT
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.startswith("beamtok: cache: 1/1 shards (100%), tokens ") and len(shown.stderr.splitlines()) == 1
    hidden = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "b"), "off"], capture_output=True, text=True, cwd=ROOT
    )
    assert hidden.returncode == 0 and hidden.stderr == ""

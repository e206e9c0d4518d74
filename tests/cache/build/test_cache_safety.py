"""Builds that meet each other, a full disk, and Ctrl-C: real `beamtok cache` processes.

Two runs on one directory: the second is refused by the build lock (a stale lock is taken
over). A file-size limit (RLIMIT_FSIZE, as ``prlimit --fsize`` sets) hit mid-write fails
with one clear line and leaves no partial file under a final name; the re-run completes the
cache. Ctrl-C prints one line, leaves the cache unfinished and resumable.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from beamtok import CacheError, Dataset
from beamtok._src.cache.build.lock import LOCK_FILE, BuildLock
from beamtok._src.cache.format.storage import Storage
from beamtok._src.cache.read.verify import verify_cache
from beamtok.testing import check_equivalent

from conftest import CORPUS, ROOT, shakespeare_copies

pytest.importorskip("apache_beam")
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
SHAKESPEARE = [CORPUS / f"shakespeare-0{i}.jsonl" for i in range(4)]


@pytest.fixture(scope="module")
def slow_inputs(tmp_path_factory) -> list[str]:
    """Six 4 MB files: a build of a few seconds, five shards still to write when the first lands."""
    return shakespeare_copies(tmp_path_factory.mktemp("slow"), 6)


def cache_command(inputs: list[str], output: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        *inputs,
        "--output",
        str(output),
        "--tokenizer",
        TOKENIZER,
        "--seq-len",
        "1024",
        "-q",
        *extra,
    ]


def online(inputs: list[str]) -> Dataset:
    return Dataset.from_files(inputs).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(1024)


def wait_for(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def test_second_build_on_the_same_directory_is_refused(tmp_path, slow_inputs):
    out = tmp_path / "cache"
    first = subprocess.Popen(cache_command(slow_inputs, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (out / LOCK_FILE).exists() or first.poll() is not None)
        assert first.poll() is None, "the first build ended before it could be paused: make the inputs bigger"
        # Paused while it holds the lock, the first build cannot finish before the second
        # has asked for the lock, however loaded the machine is.
        first.send_signal(signal.SIGSTOP)
        try:
            # -X importtime lists every module the second run imported: it must stop before Beam
            second = subprocess.run(
                [sys.executable, "-X", "importtime", *cache_command(slow_inputs, out)[1:]],
                capture_output=True,
                text=True,
                timeout=600,
            )
        finally:
            first.send_signal(signal.SIGCONT)
    finally:
        _, err_first = first.communicate(timeout=600)
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert (
        f"is being written by another `beamtok cache` run (pid {first.pid} on {socket.gethostname()}" in second.stderr
    )
    assert (
        not re.search(r"\|\s+(apache_beam|tokenizers)\b", second.stderr)  # at any depth of the import tree
    )  # refused before Beam and the tokenizer
    assert first.returncode == 0, err_first
    assert not (out / LOCK_FILE).exists()
    verify_cache(str(out), sample=1)
    again = subprocess.run(cache_command(slow_inputs, out), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr  # the lock went with the first run


def test_stale_locks_are_taken_over_and_live_ones_refused(tmp_path):
    storage = Storage(str(tmp_path / "c"))
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout
    dead = {
        "token": "x",
        "host": socket.gethostname(),
        "pid": int(gone),
        "started": time.time(),
        "heartbeat": time.time(),
    }
    storage.write_bytes(LOCK_FILE, json.dumps(dead).encode())
    with BuildLock(storage) as lock:
        assert lock.taken_over == dead
        assert json.loads(storage.read_bytes(LOCK_FILE))["pid"] == os.getpid()
        with pytest.raises(CacheError, match=rf"pid {os.getpid()} on {socket.gethostname()}"):
            BuildLock(storage).acquire()
    assert not storage.exists(LOCK_FILE)
    elsewhere = {
        "token": "y",
        "host": "another-host",
        "pid": 1,
        "started": time.time() - 50,
        "heartbeat": time.time() - 5,
    }
    storage.write_bytes(LOCK_FILE, json.dumps(elsewhere).encode())
    with pytest.raises(CacheError, match="pid 1 on another-host"):
        BuildLock(storage).acquire()
    storage.write_bytes(LOCK_FILE, json.dumps({**elsewhere, "heartbeat": time.time() - 601}).encode())
    with BuildLock(storage) as lock:
        assert lock.taken_over is not None and lock.taken_over["host"] == "another-host"


def test_heartbeat_keeps_a_long_build_locked(tmp_path):
    storage = Storage(str(tmp_path / "c"))
    with BuildLock(storage, heartbeat=0.05, stale_after=0.5):
        first = json.loads(storage.read_bytes(LOCK_FILE))["heartbeat"]
        time.sleep(0.8)
        beat = json.loads(storage.read_bytes(LOCK_FILE))["heartbeat"]
        assert beat > first + 0.5
        holder = json.loads(storage.read_bytes(LOCK_FILE))
        other = BuildLock(storage, stale_after=0.5)
        assert other.stale_reason({**holder, "host": "another-host"}) is None


def _limit_file_size(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_file_size_limit_mid_write_fails_clearly_and_a_rerun_completes(tmp_path, slow_inputs):
    big = tmp_path / "big.jsonl"
    big.write_bytes(Path(slow_inputs[0]).read_bytes() * 2)
    inputs = [*map(str, SHAKESPEARE), str(big)]  # four ~0.4 MB shard files, one ~3 MB; tokenizer.json 2.1 MB
    out = tmp_path / "cache"
    limited = subprocess.run(
        cache_command(inputs, out), capture_output=True, text=True, timeout=600, preexec_fn=_limit_file_size(2_500_000)
    )
    assert limited.returncode == 2
    assert "the build stopped writing: file too large for the file size limit" in limited.stderr
    assert "re-run the same command" in limited.stderr and "Traceback" not in limited.stderr
    assert len(limited.stderr.strip().splitlines()) == 1, limited.stderr
    names = sorted(os.listdir(out / "shards"))
    assert "shard-00004.parquet" not in names and not any(".tmp-" in n for n in names)
    assert not (out / "manifest.json").exists() and not (out / LOCK_FILE).exists()
    finished = [n for n in names if n.endswith(".parquet")]
    assert finished, "no shard was written before the limit: lower the small shards' size"
    for name in finished:  # every file under a final name is whole
        sidecar = json.loads((out / "records" / name.replace(".parquet", ".json")).read_text())
        assert pq.ParquetFile(out / "shards" / name).metadata.num_rows == sidecar["rows"]
    before = {n: (out / "shards" / n).stat().st_mtime_ns for n in finished}
    rerun = subprocess.run(cache_command(inputs, out), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert {n: (out / "shards" / n).stat().st_mtime_ns for n in finished} == before  # kept, not rewritten
    check_equivalent(lambda: Dataset.from_cache(str(out)).batch(4), lambda: online(inputs).batch(4), random_steps=4)


@pytest.mark.parametrize(
    "mode",
    [[], ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]],
    ids=["in_process", "two_workers"],
)
def test_ctrl_c_prints_one_line_and_the_rerun_completes(tmp_path, slow_inputs, mode):
    out = tmp_path / "cache"
    # the build's temporary directory, nothing left in it; short, so the worker server's socket lies there too
    scratch = Path(tempfile.mkdtemp(prefix="ctrl-c-", dir="/tmp"))
    # started as from a terminal (SIGINT not ignored), whatever this run was started with
    build = subprocess.Popen(
        cache_command(slow_inputs, out, *mode), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=_default_sigint, env={**os.environ, "TMPDIR": str(scratch)},
    )  # fmt: skip
    wait_for(lambda: (out / "records" / "shard-00000.json").exists() or build.poll() is not None)
    assert build.poll() is None, "the build ended before the interrupt: make the inputs bigger"
    os.killpg(build.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group
    _, stderr = build.communicate(timeout=120)
    assert build.returncode == 130
    assert stderr.strip() == (
        f"beamtok: interrupted: the cache {out} is unfinished; re-run the same command to complete it (finished shards are kept)"
    ), stderr
    assert not (out / "manifest.json").exists() and not (out / LOCK_FILE).exists()
    time.sleep(0.5)
    assert sorted(p.name for p in scratch.iterdir()) == []  # progress files, the worker server's socket, Beam's own
    scratch.rmdir()
    rerun = subprocess.run(cache_command(slow_inputs, out, *mode), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    verify_cache(str(out), sample=1)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["documents"]["read"] == len(slow_inputs) * sum(1 for p in SHAKESPEARE for _ in open(p))


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_build_started_with_ctrl_c_ignored_runs_through_it(tmp_path, slow_inputs):
    """Started as nohup or a shell's background job starts it (SIGINT ignored), the launcher
    keeps ignoring SIGINT: the build completes."""
    out = tmp_path / "cache"
    command = cache_command(slow_inputs, out, "--direct_running_mode=multi_processing", "--direct_num_workers=2")
    build = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_ignore_sigint,
    )
    wait_for(lambda: (out / "records" / "shard-00000.json").exists() or build.poll() is not None)
    assert build.poll() is None, "the build ended before the interrupt: make the inputs bigger"
    os.killpg(build.pid, signal.SIGINT)
    _, stderr = build.communicate(timeout=600)
    assert build.returncode == 0, stderr
    assert "interrupted" not in stderr
    verify_cache(str(out), sample=1)


def test_local_worker_processes_leave_ctrl_c_to_the_launcher(tmp_path, ctrl_c_taken):
    """A multi_processing worker that took the terminal's Ctrl-C printed its own traceback
    before the launcher could silence it; started by beamtok, workers ignore SIGINT."""
    import apache_beam as beam

    from beamtok._src.beam.pipelines import make_pipeline

    def report_sigint(element: int, directory: str) -> int:  # nested: pickled by value, for the workers
        import os
        import signal

        disposition = "ignored" if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else "raised"
        with open(os.path.join(directory, f"{os.getpid()}-{element}"), "w") as f:
            f.write(disposition)
        return element

    pipeline = make_pipeline(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    _ = pipeline | beam.Create(list(range(8))) | beam.Reshuffle() | beam.Map(report_sigint, str(tmp_path))
    pipeline.run().wait_until_finish()
    reports = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert len(reports) == 8 and all(
        int(name.split("-")[0]) != os.getpid() for name in reports
    )  # ran in worker processes
    assert set(reports.values()) == {"ignored"}
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN  # the launcher still takes Ctrl-C

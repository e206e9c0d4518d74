"""Local Beam workers forked warm by the worker server: a build that asks for worker processes
gets them from the server (their parent is it), they leave Ctrl-C to the launcher, the next
build gets them from the same server, the cache is the one in-process builds write, the server
ends with its launcher (even a killed one), and a shim that cannot reach a server starts the
usual cold worker."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_split_build import same_cache

from beamtok import Dataset
from beamtok._src.beam import worker_server
from beamtok._src.beam.worker_server import WorkerServer, asks_for_local_workers, process_server, start_early
from beamtok._src.core.spec import tokenizers_to_warm

from conftest import CORPUS, ROOT

pytest.importorskip("apache_beam")
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
TWO = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def run_reporting(tmp_path: Path) -> list[tuple[int, int, str]]:
    """A 2-worker pipeline whose elements report (worker pid, its parent, SIGINT disposition);
    each worker's collector state is left in ``tmp_path`` for :func:`collector_states`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    import apache_beam as beam

    from beamtok._src.beam.pipelines import make_pipeline

    def report(element: int, directory: str) -> int:  # nested: pickled by value, for the workers
        import gc
        import os
        import signal

        sigint = "ignored" if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else "raised"
        with open(os.path.join(directory, f"{os.getpid()}-{element}"), "w") as f:
            f.write(f"{os.getppid()} {sigint} {int(gc.isenabled())} {gc.get_freeze_count()}")
        return element

    pipeline = make_pipeline(TWO)
    _ = pipeline | beam.Create(list(range(8))) | beam.Reshuffle() | beam.Map(report, str(tmp_path))
    pipeline.run().wait_until_finish()
    out = []
    for p in tmp_path.iterdir():
        parent, sigint, _, _ = p.read_text().split()
        out.append((int(p.name.split("-")[0]), int(parent), sigint))
    return out


def collector_states(tmp_path: Path) -> set[tuple[bool, int]]:
    """(collector on, objects frozen) of each worker of a :func:`run_reporting` run."""
    states = set()
    for p in tmp_path.iterdir():
        _, _, enabled, frozen = p.read_text().split()
        states.add((enabled == "1", int(frozen)))
    return states


def test_which_options_ask_for_local_workers():
    assert asks_for_local_workers(TWO)
    assert asks_for_local_workers(["--direct_running_mode", "multi_processing"])
    assert asks_for_local_workers([*TWO, "--runner=DirectRunner"])
    assert not asks_for_local_workers([])
    assert not asks_for_local_workers(["--direct_running_mode=multi_processing", "--direct_num_workers=1"])
    assert not asks_for_local_workers([*TWO, "--runner=DataflowRunner"])
    assert not asks_for_local_workers(["--direct_running_mode=in_memory", "--direct_num_workers=2"])


def test_workers_are_forked_by_the_server_and_leave_ctrl_c_to_the_launcher(tmp_path, ctrl_c_taken):
    start_early(TWO)
    server = worker_server._server
    assert server is not None
    reports = run_reporting(tmp_path / "first")
    assert len(reports) == 8 and all(pid != os.getpid() for pid, _, _ in reports)
    assert {parent for _, parent, _ in reports} == {server.process.pid}  # forked by the server, not started cold
    assert {sigint for _, _, sigint in reports} == {"ignored"}
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    # each worker collects its own garbage, never walking what the server made (Beam's modules: frozen)
    assert {enabled for enabled, _ in collector_states(tmp_path / "first")} == {True}
    assert min(frozen for _, frozen in collector_states(tmp_path / "first")) > 100_000
    again = run_reporting(tmp_path / "second")  # the next build's workers come from the same server
    assert {parent for _, parent, _ in again} == {server.process.pid} and server.process.poll() is None
    assert process_server() is server


def test_a_dead_server_is_replaced(tmp_path):
    first = process_server()
    assert first is not None
    first.process.kill()
    first.process.wait()
    reports = run_reporting(tmp_path)
    second = worker_server._server
    assert second is not None and second is not first and not os.path.exists(first.directory)
    assert {parent for _, parent, _ in reports} == {second.process.pid}


@pytest.mark.timeout(180)  # a shim that starts no worker leaves Beam waiting for one
def test_a_shim_without_a_server_starts_a_cold_worker(tmp_path, monkeypatch):
    dead = WorkerServer.start()
    dead.process.kill()
    dead.process.wait()
    import beamtok._src.beam.local_runner as local_runner

    monkeypatch.setattr(local_runner, "process_server", lambda: dead)  # the shims are told of a server that is gone
    reports = run_reporting(tmp_path)
    assert len(reports) == 8 and dead.process.pid not in {parent for _, parent, _ in reports}
    assert {sigint for _, _, sigint in reports} == {"ignored"}
    assert all("beamtok._src.beam.local_worker" in cmdline(pid) or not cmdline(pid) for pid, _, _ in reports)
    assert {enabled for enabled, _ in collector_states(tmp_path)} == {True}


def test_a_warm_two_worker_build_writes_the_in_process_cache(tmp_path):
    book = str(CORPUS / "shakespeare-00.jsonl")
    make = lambda: Dataset.from_files(book).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(128)  # noqa: E731
    make().cache(str(tmp_path / "in"), progress=False, split_bytes=100_000, row_group_rows=20)
    make().cache(
        str(tmp_path / "warm"),
        progress=False,
        split_bytes=100_000,
        row_group_rows=20,
        direct_running_mode="multi_processing",
        direct_num_workers=2,
    )
    same_cache(tmp_path / "warm", tmp_path / "in")


def run_checking_tokenizer(tmp_path: Path, fingerprint: str) -> set[str]:
    """A 2-worker pipeline whose elements report, before anything of theirs loads a tokenizer,
    whether their worker holds this one and its fast-path encoder."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    import apache_beam as beam

    from beamtok._src.beam.pipelines import make_pipeline

    def check(element: int, directory: str, fingerprint: str) -> int:
        import os

        from beamtok._src.transforms import tokenizer_registry

        held = tokenizer_registry._CACHE.get(fingerprint)
        state = "none" if held is None else "encoder" if held._choice is not None else "tokenizer"
        with open(os.path.join(directory, f"{os.getpid()}-{element}"), "w") as f:
            f.write(state)
        return element

    pipeline = make_pipeline(TWO)
    _ = pipeline | beam.Create(list(range(8))) | beam.Reshuffle() | beam.Map(check, str(tmp_path), fingerprint)
    pipeline.run().wait_until_finish()
    return {p.read_text() for p in tmp_path.iterdir()}


def test_the_server_loads_a_builds_tokenizers_and_their_encoders_before_forking_its_workers(tmp_path):
    ds = Dataset.from_files(str(CORPUS / "shakespeare-00.jsonl")).tokenize(TOKENIZER).concat_chunk(64)
    (ref,) = [step.tokenizer_ref for step in ds.spec.steps if step.tokenizer_ref is not None]
    start_early(TWO, lambda: tokenizers_to_warm(ds.spec))
    server = worker_server._server
    assert server is not None and ref.fingerprint in server.warmed
    assert run_checking_tokenizer(tmp_path / "warm", ref.fingerprint) == {"encoder"}
    assert not list(Path(server.directory).glob("warm-*.json"))  # read, then removed


def test_a_warm_file_the_server_cannot_read_leaves_it_serving(tmp_path):
    server = process_server()
    assert server is not None and server.process.stdin is not None
    broken = Path(server.directory, "warm-broken.json")
    broken.write_text("{not json")
    server.process.stdin.write(f"warm {broken}\n".encode())
    server.process.stdin.flush()
    reports = run_reporting(tmp_path)  # workers still come from it
    assert {parent for _, parent, _ in reports} == {server.process.pid} and not broken.exists()


def test_the_server_ends_when_its_launcher_is_killed(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from beamtok._src.beam.worker_server import start_early
        import beamtok._src.beam.worker_server as w
        start_early({TWO!r})
        print(w._server.process.pid, flush=True)
        time.sleep(600)
        """
    )
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(launcher.stdout.readline())
        deadline = time.monotonic() + 60  # /proc shows an empty command line while the process is being set up
        while "beamtok._src.beam.fork_server" not in cmdline(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "beamtok._src.beam.fork_server" in cmdline(server_pid)
        launcher.kill()
        launcher.wait()
        deadline = time.monotonic() + 60
        while "beamtok._src.beam.fork_server" in cmdline(server_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "beamtok._src.beam.fork_server" not in cmdline(server_pid)  # gone (or a zombie awaiting init)
    finally:
        launcher.kill()


def servers_marked(mark: str) -> set[int]:
    """Worker servers alive whose environment carries ``BEAMTOK_TEST_MARK=mark``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and "beamtok._src.beam.fork_server" in cmdline(int(entry.name)):
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"BEAMTOK_TEST_MARK={mark}".encode() in environ:
                found.add(int(entry.name))
    return found


def test_the_cli_starts_the_server_before_loading_the_tokenizer_and_a_failure_leaves_none(tmp_path):
    """``beamtok cache`` with worker processes starts the server first, so its Beam import runs
    while the command loads the tokenizer; a tokenizer that cannot load is a one-line error,
    and the server it started ends with the command."""
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    missing = tmp_path / "no-such-tokenizer"
    command = [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        str(CORPUS / "shakespeare-00.jsonl"),
        "--output",
        str(tmp_path / "out"),
        "--tokenizer",
        str(missing),
        "--seq-len",
        "64",
        *TWO,
    ]
    cli = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BEAMTOK_TEST_MARK": mark},
    )
    seen: set[int] = set()
    while cli.poll() is None:
        seen |= servers_marked(mark)
        time.sleep(0.01)
    _, err = cli.communicate()
    assert cli.returncode != 0 and "Traceback" not in err and str(missing) in err
    assert seen, "no worker server was started before the tokenizer failed to load"
    deadline = time.monotonic() + 60
    while servers_marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not servers_marked(mark)


def test_a_temporary_directory_too_deep_for_a_socket_puts_it_in_a_short_one(tmp_path, monkeypatch):
    """A Unix socket's path holds at most 107 bytes: under a deep ``TMPDIR`` the server's
    directory goes to /tmp instead of failing the build (it did, with a traceback)."""
    import socket
    import tempfile

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    directory = worker_server.socket_directory()
    try:
        assert (
            Path(directory).parent == Path(worker_server.SHORT_TEMP_ROOT)
            and oct(os.stat(directory).st_mode & 0o777) == "0o700"
        )
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(os.path.join(directory, worker_server.SOCKET_NAME))
        assert list(deep.iterdir()) == []  # the first try, too deep, was removed
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    short = Path(tempfile.mkdtemp(prefix="s-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(short))  # short enough: there
    try:
        assert Path(worker_server.socket_directory()).parent == short
    finally:
        shutil.rmtree(short)


def test_no_room_for_the_socket_anywhere_leaves_workers_to_start_cold(tmp_path, monkeypatch, caplog):
    import tempfile

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    monkeypatch.setattr(worker_server, "SHORT_TEMP_ROOT", str(tmp_path / "missing"))
    monkeypatch.setattr(worker_server, "_server", None)
    with caplog.at_level("WARNING", logger=worker_server.__name__):
        assert process_server() is None
    assert "local workers start without it" in caplog.text

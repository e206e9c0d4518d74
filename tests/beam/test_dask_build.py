"""beamtok cache on a dask.distributed cluster: a scheduler and two workers started as separate
processes on 127.0.0.1 (in a directory of their own, so relative input paths must be opened
under the launching directory), Beam's Dask runner handing them the build over TCP. Whole files
and files cut into byte ranges give the local build's cache byte for byte; a worker SIGKILLed
mid-build leaves a build that completes (or a re-run that does) with the same bytes; after a
scheduler restart a re-run reuses the shards finished before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ROOT, free_port, real_paragraphs, write_jsonl

pytest.importorskip("apache_beam")
distributed = pytest.importorskip("distributed")

DASK = str(Path(sys.executable).parent / "dask")
TOKENIZER = "data/tokenizers/gpt2"


class Cluster:
    """A scheduler and ``workers`` single-threaded worker processes, each a process group."""

    def __init__(self, where: Path, workers: int = 2) -> None:
        self.where, self.workers = where, workers
        self.port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.where / "cluster.log", "ab")
        command = [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard"]
        self.processes.append(subprocess.Popen(command, cwd=self.where, stdout=log, stderr=log, start_new_session=True))
        for _ in range(self.workers):
            worker = [
                DASK,
                "worker",
                f"tcp://{self.address}",
                "--nthreads",
                "1",
                "--no-dashboard",
                "--death-timeout",
                "60",
            ]
            self.processes.append(
                subprocess.Popen(worker, cwd=self.where, stdout=log, stderr=log, start_new_session=True)
            )
        with distributed.Client(self.address, timeout=60) as client:
            client.wait_for_workers(self.workers, timeout=60)

    def worker_pids(self) -> list[int]:
        """The worker processes themselves (below each ``dask worker`` nanny)."""
        with distributed.Client(self.address, timeout=30) as client:
            return sorted(int(pid) for pid in client.run(os.getpid).values())

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.processes = []


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    where = tmp_path / "cluster"
    where.mkdir()
    running = Cluster(where)
    yield running
    running.stop()


@pytest.fixture
def inputs(tmp_path) -> list[str]:
    """Sixteen files under the launching directory, named relative to it; two large enough to cut."""
    paragraphs = real_paragraphs(120)
    directory = tmp_path / "in"
    directory.mkdir()
    paths = []
    for i in range(16):
        count = 100 if i in (1, 4) else 12
        write_jsonl(directory / f"part-{i}.jsonl", [{"text": p} for p in (paragraphs[i * 10 :] + paragraphs)[:count]])
        paths.append(os.path.relpath(directory / f"part-{i}.jsonl", ROOT))
    return paths


def build(inputs: list[str], output: Path, *beam: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        *inputs,
        "--tokenizer",
        TOKENIZER,
        "--seq-len",
        "64",
        "--output",
        str(output),
        "--split-bytes",
        "8KB",
        *beam,
    ]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def files_of(directory: Path) -> dict[str, bytes]:
    """Every file of a cache, the manifest without its creation time."""
    out = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if path.name == "manifest.json":
                manifest = json.loads(data)
                manifest.get("build", {}).pop("created", None)
                manifest.pop("created", None)
                data = json.dumps(manifest, sort_keys=True).encode()
            out[str(path.relative_to(directory))] = data
    return out


def on_dask(cluster: Cluster) -> list[str]:
    return ["--runner=DaskRunner", f"--dask_client_address={cluster.address}"]


@pytest.fixture
def local(inputs, tmp_path) -> dict[str, bytes]:
    done = build(inputs, tmp_path / "local")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "split_shards 2," in done.stdout  # two files are cut into ranges, on every runner
    return files_of(tmp_path / "local")


def test_a_dask_cluster_builds_the_local_cache_byte_for_byte(cluster, inputs, local, tmp_path):
    done = build(
        inputs,
        tmp_path / "dask",
        "--runner=apache_beam.runners.dask.dask_runner.DaskRunner",
        f"--dask_client_address={cluster.address}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert files_of(tmp_path / "dask") == local
    assert not any("range" in path.name for path in (tmp_path / "dask").rglob("*"))  # the ranges' files are gone
    short = build(inputs, tmp_path / "dask-short", *on_dask(cluster))  # --runner=DaskRunner: the short name works too
    assert short.returncode == 0, short.stderr[-3000:]
    assert files_of(tmp_path / "dask-short") == local
    # the runner reports no Beam counters: the build's figures are printed from the manifest instead
    assert "counters (from the manifest; the runner reports no Beam counters): shards " in short.stdout


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--runner=DaskRunner"], "--runner=DaskRunner needs --dask_client_address=HOST:PORT"),
        (["--runner=DaskRunner", "--dask_client_address=127.0.0.1:PORT"], "cannot reach the Dask scheduler at 127.0.0.1:"),
        (["--runner=DaskRunner", "--dask_client_address=tcp://127.0.0.1:1", "--dask_partition_size=0"], "--dask_partition_size=0: a whole number of at least 1"),
    ],
    ids=["no_address", "nobody_there", "partition_size_0"],
)  # fmt: skip
def test_dask_mistakes_are_one_line_at_once_and_write_nothing(inputs, tmp_path, options, says):
    port = free_port()  # nothing listens there
    started = time.monotonic()
    done = build(inputs, tmp_path / "out", *(o.replace("PORT", str(port)) for o in options))
    assert done.returncode != 0 and time.monotonic() - started < 25
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert not [p for p in (tmp_path / "out").rglob("*") if p.is_file()]  # nothing written


def test_a_lost_scheduler_is_named_as_such():
    import socket

    from beamtok._src.beam.dask_options import lost_scheduler

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        args = ["--runner=DaskRunner", f"--dask_client_address={address}"]
        assert lost_scheduler(args) is None  # it still answers: the build failed for another reason
    said = lost_scheduler(args)
    assert said is not None and said.startswith(f"the Dask scheduler at {address} was lost during the build (")
    assert lost_scheduler(["--direct_num_workers=2"]) is None


def test_a_worker_killed_mid_build_leaves_the_same_cache(cluster, inputs, local, tmp_path):
    output = tmp_path / "dask"
    killed: list[int] = []
    unfinished: list[bool] = []

    def kill_once_a_shard_is_written() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any((output / "shards").glob("*.parquet")) if (output / "shards").exists() else False:
                pid = cluster.worker_pids()[0]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                unfinished.append(not (output / "manifest.json").exists())
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_once_a_shard_is_written)
    killer.start()
    first = build(inputs, output, *on_dask(cluster))
    killer.join()
    assert killed and unfinished == [True], "the worker was not killed mid-build"
    print(
        f"the build {'completed' if first.returncode == 0 else 'failed and a re-run completed it'} after its worker was killed"
    )
    if first.returncode != 0:  # the build may fail with its worker; a re-run completes it
        assert not (output / "manifest.json").exists()
        again = build(inputs, output, *on_dask(cluster))
        assert again.returncode == 0, again.stderr[-3000:]
    assert files_of(output) == local


def test_a_re_run_after_a_scheduler_restart_reuses_finished_shards(cluster, inputs, local, tmp_path):
    output = tmp_path / "dask"
    assert build(inputs, output, *on_dask(cluster)).returncode == 0
    (output / "manifest.json").unlink()  # as a build stopped before its last step leaves it
    (output / "shards" / "shard-00002.parquet").unlink()
    (output / "records" / "shard-00002.json").unlink()  # and one shard never written
    written = {p.name: p.stat().st_mtime_ns for p in (output / "shards").glob("*.parquet")}
    cluster.stop()
    cluster.start()
    again = build(inputs, output, *on_dask(cluster))
    assert again.returncode == 0, again.stderr[-3000:]
    assert files_of(output) == local
    assert {
        p.name: p.stat().st_mtime_ns for p in (output / "shards").glob("*.parquet") if p.name in written
    } == written  # reused, not rewritten


def test_on_dask_each_file_or_range_is_a_partition_unless_sized():
    from beamtok._src.beam.options import DASK_RUNNER, runner_name

    assert runner_name(["--runner=DaskRunner", "--dask_client_address=h:1"]) == [
        f"--runner={DASK_RUNNER}",
        "--dask_client_address=h:1",
        "--dask_partition_size=1",
    ]
    assert runner_name(["--runner", "DaskRunner"]) == ["--runner", DASK_RUNNER, "--dask_partition_size=1"]
    assert runner_name([f"--runner={DASK_RUNNER}", "--dask_npartitions=4"]) == [
        f"--runner={DASK_RUNNER}",
        "--dask_npartitions=4",
    ]
    assert runner_name(["--direct_num_workers=2"]) == ["--direct_num_workers=2"]

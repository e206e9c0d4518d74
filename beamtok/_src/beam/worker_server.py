"""Local Beam workers that start warm: forked by a process that has already imported Beam.

A ``multi_processing`` build starts each worker as a new interpreter, which imports Beam and
beamtok before it can take work: about a second a worker, after the launcher has spent the
same second importing Beam itself. A build that asks for local worker processes therefore
starts one *worker server* first (``python -m beamtok._src.beam.fork_server``), before the launcher
imports Beam, so both imports run at once on separate cores. When Beam starts a worker, the
command it runs is a stdlib-only shim (``beam/worker_shim.py``) that hands its environment,
arguments and standard streams to the server; the server forks a worker with everything
already imported, and the shim waits for it and exits with its status. Beam sees an ordinary
worker process. If the server is gone, the shim starts the usual cold worker instead. The
server stays up for the process's next builds.

The launcher also hands the server its build's tokenizers (``WorkerServer.warm``), which it
loads, with their fast-path encoders, before forking that build's workers: each would
otherwise spend its first half second on them. The server holds no thread and no connection
when it forks (it only imports, loads and waits), so a fork is safe; it exits when the
launcher closes its standard input, or dies.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import Any

from beamtok._src.base.scratch import hold_directory, release_directory
from beamtok._src.core.cache_options import LOCAL_RUNNERS

__all__ = ["WorkerServer", "asks_for_local_workers", "option_value", "process_server", "start_early"]

SOCKET_NAME = "workers.sock"
MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path on Linux (sun_path holds 108, NUL included)
SHORT_TEMP_ROOT = "/tmp"  # where the socket goes when the temporary directory's path is too long for one

log = logging.getLogger(__name__)


def socket_directory() -> str:
    """A new private directory for the server's socket (and the files it is sent), under the
    temporary directory unless the socket's path would be too long there (a deep ``TMPDIR``)."""
    directory = tempfile.mkdtemp(prefix="beamtok-workers-")
    if len(os.fsencode(os.path.join(directory, SOCKET_NAME))) <= MAX_SOCKET_PATH:
        return directory
    os.rmdir(directory)
    return tempfile.mkdtemp(prefix="beamtok-workers-", dir=SHORT_TEMP_ROOT)


def option_value(args: Sequence[str], name: str) -> str | None:
    """The value the command-line flags give ``--name`` (the last one wins), or None."""
    value = None
    for i, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
        elif arg == f"--{name}" and i + 1 < len(args):
            value = args[i + 1]
    return value


def asks_for_local_workers(beam_args: Sequence[str]) -> bool:
    """Whether these Beam options run a local build on worker processes (read from the flags
    alone, without importing Beam: a guess that only decides whether to start warm)."""
    runner = option_value(beam_args, "runner")
    workers = option_value(beam_args, "direct_num_workers")
    return (
        runner in LOCAL_RUNNERS
        and option_value(beam_args, "direct_running_mode") == "multi_processing"
        and (workers is None or not workers.isdigit() or int(workers) != 1)
    )


class WorkerServer:
    """A running worker server: its process and the socket workers are asked for on."""

    def __init__(self, process: subprocess.Popen[bytes], directory: str) -> None:
        self.process = process
        self.directory = directory
        self.socket_path = os.path.join(directory, SOCKET_NAME)
        self.warmed: set[str] = set()  # fingerprints already sent to the server

    @classmethod
    def start(cls) -> WorkerServer:
        """Bind the socket here (a shim can connect at once; it waits while the server
        imports) and start the server process on it."""
        directory = hold_directory(socket_directory())
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(os.path.join(directory, SOCKET_NAME))
            listener.listen(64)
            fd = listener.fileno()
            process = subprocess.Popen(
                [sys.executable, "-m", "beamtok._src.beam.fork_server", str(fd)], stdin=subprocess.PIPE, pass_fds=[fd]
            )
        except BaseException:
            release_directory(directory)
            raise
        finally:
            listener.close()  # the server holds it now: once it is gone, a shim cannot connect
        return cls(process, directory)

    def worker_command(self) -> str:
        """The shell command Beam runs for a worker: the shim, which asks this server."""
        shim = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "beam", "worker_shim.py")
        return " ".join(shlex.quote(part) for part in (sys.executable, "-I", "-S", shim, self.socket_path))

    def warm(self, items: Sequence[dict[str, Any]]) -> None:
        """Have the server load these tokenizers (``{"tokenizer": serialized, "fast_path":
        bool}``, as ``tokenizers_to_warm`` lists them), and build the fast-path encoder where
        asked, before it forks this build's workers. Sent through a file in the server's
        directory, named on a line of its standard input; nothing waits for it."""
        fresh = [item for item in items if item["tokenizer"]["fingerprint"] not in self.warmed]
        if not fresh or self.process.stdin is None:
            return
        handle, path = tempfile.mkstemp(prefix="warm-", suffix=".json", dir=self.directory)
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump(fresh, f)
        try:
            self.process.stdin.write(f"warm {path}\n".encode())
            self.process.stdin.flush()
        except OSError:  # the server is gone: workers start cold and load them themselves
            os.remove(path)
            return
        self.warmed.update(item["tokenizer"]["fingerprint"] for item in fresh)

    def close(self) -> None:
        """Stop the server (workers it forked end with their control channels)."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        release_directory(self.directory)


_server: WorkerServer | None = None
_server_lock = threading.Lock()  # builds started from two threads share one server


def start_early(beam_args: Sequence[str], warm: Callable[[], Sequence[dict[str, Any]]] | None = None) -> None:
    """Start this process's worker server now, before Beam is imported, if these options ask
    for local worker processes (see :func:`process_server`), and have it load the tokenizers
    ``warm`` lists (called only then) for the workers it will fork."""
    if asks_for_local_workers(beam_args):
        server = process_server()
        if server is not None and warm is not None:
            server.warm(warm())


def process_server() -> WorkerServer | None:
    """This process's worker server, started by the first local build that asks for worker
    processes and kept for the next ones (a notebook's, a data config's datasets): it ends
    when this process does. None where workers start cold: off Linux (forking a process
    that has loaded system libraries is not safe on macOS; Windows has no fork)."""
    global _server
    if not sys.platform.startswith("linux"):
        return None
    with _server_lock:
        if _server is not None and _server.process.poll() is not None:
            _server.close()  # it died: workers would fall back to cold ones; start another
            _server = None
        if _server is None:
            try:
                _server = WorkerServer.start()
            except OSError as e:  # no socket here (a full or read-only temporary directory...): workers start cold
                log.warning("beamtok: cannot start the worker server (%s); local workers start without it", e)
                return None
            atexit.register(_server.close)
        return _server

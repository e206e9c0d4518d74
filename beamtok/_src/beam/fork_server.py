"""The worker server: imports Beam and beamtok once, then forks a local worker per request.

Started by :class:`beamtok._src.beam.worker_server.WorkerServer` as ``python -m beamtok._src.beam.fork_server
FD``, FD the listening socket (bound by the launcher, so a worker's shim can connect from the
start), with a pipe from the launcher as standard input. Each connection
carries a shim's standard streams, environment, arguments and working directory
(``worker_shim.py``); the forked worker takes them over, runs Beam's SDK worker and sends its
exit status back before it leaves. A line ``warm PATH`` on standard input names a file of
serialized tokenizers to load here first, so forked workers do not each load them and build
their fast-path encoders before their first bundle. The server keeps
no thread, so forking it is safe, and runs without the cyclic garbage collector: what it made
is frozen before each fork, so a worker's collections neither walk it nor copy its pages (which
cost each worker page faults during its first collection). It ends when its
standard input does (the launcher closed it, or died); Ctrl-C is the launcher's.
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any

REQUEST_LIMIT = 1 << 24


def preload() -> None:
    """Import what every worker imports, so a forked one starts with it done."""
    import apache_beam.runners.worker.sdk_worker_main  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import beamtok._src.beam.build
    import beamtok._src.engines.tiktoken_backend  # noqa: F401


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    header, fds, _, _ = socket.recv_fds(conn, 4, 3)
    if len(header) != 4 or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("a worker request must start with its length and three file descriptors")
    length = int.from_bytes(header, "little")
    if length > REQUEST_LIMIT:
        raise ValueError(f"a worker request of {length} bytes")
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            raise ValueError("a worker request ended early")
        body += chunk
    return json.loads(body), fds


def _worker(conn: socket.socket, request: dict[str, Any], fds: list[int], close: list[Any]) -> None:
    """In the forked child: become the shim's worker, run it, report its status, leave."""
    status = 1
    gc.enable()  # what the server made is frozen: this worker's collections never walk it
    try:
        for thing in close:
            thing.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from beamtok._src.beam.local_worker import run_sdk_worker

        status = run_sdk_worker(["worker", *request["argv"]])
    finally:
        try:
            conn.sendall(bytes([status & 0xFF]))
        except OSError:
            pass
        os._exit(status)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def warm(path: str) -> None:
    """Load the tokenizers a launcher listed in the file at ``path`` (and build the fast-path
    encoder of those that use it), so the workers forked from here start with them; the file
    is removed. Warming only saves time: what fails here is reported and left to the workers."""
    try:
        with open(path, "rb") as f:
            items = json.load(f)
        from beamtok._src.transforms.tokenizer_registry import register_serialized

        for tok, item in zip(register_serialized([item["tokenizer"] for item in items]), items):
            if item["fast_path"]:
                _ = tok.engine_choice  # the engine chosen now, before the workers fork
    except Exception as e:  # any failure: the workers load the tokenizers themselves, as without a server
        print(
            f"beamtok worker server: could not load the tokenizers in {path}: {type(e).__name__}: {e}", file=sys.stderr
        )
    finally:
        try:
            os.remove(path)
        except OSError:
            pass


def serve(listener: socket.socket) -> None:
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    stdin = sys.stdin.fileno()
    selector.register(stdin, selectors.EVENT_READ)
    pending = b""
    while True:
        # the launcher's lines first: tokenizers it asked to warm are loaded before a worker forks
        for key, _ in sorted(selector.select(timeout=1.0), key=lambda event: event[0].fileobj == listener):
            if key.fileobj != listener:
                data = os.read(stdin, 4096)
                if not data:
                    return  # the launcher closed its end, or is gone
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    command, _, argument = line.decode().partition(" ")
                    if command == "warm":
                        warm(argument)
                continue
            conn, _ = listener.accept()
            try:
                request, fds = _receive(conn)
            except (OSError, ValueError) as e:
                print(f"beamtok worker server: {e}", file=sys.stderr)
                conn.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            gc.freeze()
            if os.fork() == 0:
                _worker(conn, request, fds, [selector, listener])
            for fd in fds:
                os.close(fd)
            conn.close()
        _reap()


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Off for the server's life: it only imports, loads tokenizers and forks, and a collection
    # would both slow that and write to every object's header, so a forked worker's first
    # writes to those pages would copy them (Python's gc.freeze recipe for servers that fork).
    gc.disable()
    listener = socket.socket(fileno=int(sys.argv[1]))
    preload()
    try:
        serve(listener)
    finally:
        listener.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # nothing to tear down: skip unloading Beam (the launcher would wait for it)


if __name__ == "__main__":
    main()

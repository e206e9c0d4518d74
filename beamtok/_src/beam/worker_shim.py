"""The command Beam runs for a local worker when a worker server is up (``beamtok._src.beam.worker_server``).

Run as ``python -I -S worker_shim.py SOCKET [worker arguments]``: standard library only, so it
starts in milliseconds. It sends the worker server its environment (Beam's control and
logging addresses, the pipeline options), arguments, working directory and standard streams,
waits for the forked worker to finish and exits with its status. Ctrl-C is left to the
launcher, as ``local_worker`` does. Without a server to reach it becomes that cold worker.
"""

import json
import os
import signal
import socket
import sys


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    path, argv = sys.argv[1], sys.argv[2:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        os.execv(sys.executable, [sys.executable, "-m", "beamtok._src.beam.local_worker", *argv])
    body = json.dumps({"env": dict(os.environ), "argv": argv, "cwd": os.getcwd()}).encode()
    socket.send_fds(conn, [len(body).to_bytes(4, "little")], [0, 1, 2])
    conn.sendall(body)
    status = b""
    while True:
        chunk = conn.recv(64)
        if not chunk:
            break
        status += chunk
    sys.exit(status[-1] if status else 1)  # no status: the worker died before reporting one


if __name__ == "__main__":
    main()

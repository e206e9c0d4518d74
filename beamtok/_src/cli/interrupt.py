"""Ctrl-C during a cache build: one line, the build lock released, exit status 130."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["interrupted_build"]


@contextlib.contextmanager
def interrupted_build(output: str) -> Iterator[None]:
    """Ctrl-C during a build: one line saying what state the cache is in, exit status 130.

    Left to Beam, the interrupt surfaces inside a DoFn, is logged with its traceback and
    re-raised as a RuntimeError while worker threads keep the process alive, and the local
    worker processes (in the terminal's process group) print tracebacks of their own. So a
    thread watches the signal wakeup descriptor (whichever thread the signal lands on): it
    silences the workers' output, releases the build lock, prints the line and ends the
    process at once.

    A launcher started with SIGINT ignored (``nohup``, or a job a shell put in the background)
    keeps ignoring it, as Python itself does: whoever started it asked that the build not be
    stopped by Ctrl-C, and its workers ignore SIGINT anyway."""
    import signal
    import threading

    from beamtok._src.base.scratch import remove_held_directories
    from beamtok._src.beam.worker_logs import mute_workers
    from beamtok._src.cache.build.lock import release_held_locks

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return
    message = (
        f"\nbeamtok: interrupted: the cache {output} is unfinished; re-run the same command to complete it "
        "(finished shards are kept)\n"
    ).encode()
    stderr = os.dup(2)  # the terminal's: a local build points descriptor 2 at its log filter
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)

    def watch() -> None:
        while True:
            try:
                data = os.read(wake_read, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGINT in data:
                mute_workers()
                release_held_locks()
                remove_held_directories()  # os._exit runs no finally: the build's scratch goes now
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                os.write(stderr, message)
                os._exit(130)

    previous_handler = signal.signal(signal.SIGINT, lambda *_: None)  # the watcher acts
    previous_fd = signal.set_wakeup_fd(wake_write)
    watcher = threading.Thread(target=watch, name="beamtok-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous_handler)
        os.close(wake_write)  # the watcher reads end-of-file and returns
        watcher.join(timeout=5)
        os.close(wake_read)
        os.close(stderr)

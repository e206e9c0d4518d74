"""A local Beam worker process that leaves Ctrl-C to the process that launched it.

``--direct_running_mode=multi_processing`` starts its workers in the terminal's process
group, so Ctrl-C reached each of them too, and a worker waiting on its control channel
printed the interrupt's traceback before the launcher could silence it (a race a loaded
machine lost). Started through this module, a worker ignores SIGINT from its first line; the
launcher handles the interrupt (one line, the build lock released, exit 130), and a worker
ends when its control channel closes with the launcher. Run as
``python -m beamtok._src.beam.local_worker``: the rest is Beam's own ``sdk_worker_main``. A worker
forked by the worker server (``fork_server.py``) runs the same :func:`run_sdk_worker`.

Once its control channel has closed a worker has no work left, so it leaves without the
interpreter's teardown: unloading Beam, Arrow and a tokenizer is slow, and
the runner waits for its workers one after another before the build returns.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
from typing import NoReturn


def run_sdk_worker(argv: list[str]) -> int:
    """Run Beam's SDK worker (its addresses and options come from the environment) until its
    control channel closes; return the process's exit status."""
    from apache_beam.runners.worker import sdk_worker_main

    try:
        sdk_worker_main.main(argv)
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()


def main() -> NoReturn:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os._exit(run_sdk_worker(sys.argv))


if __name__ == "__main__":
    main()

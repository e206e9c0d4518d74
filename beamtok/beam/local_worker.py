"""A local Beam worker process that leaves Ctrl-C to the process that launched it.

``--direct_running_mode=multi_processing`` starts its workers in the terminal's process
group, so Ctrl-C reached each of them too, and a worker waiting on its control channel
printed the interrupt's traceback before the launcher could silence it (a race a loaded
machine lost). Started through this module, a worker ignores SIGINT from its first line; the
launcher handles the interrupt (one line, the build lock released, exit 130), and a worker
ends when its control channel closes with the launcher. Run as
``python -m beamtok.beam.local_worker``: the rest is Beam's own ``sdk_worker_main``.
"""

from __future__ import annotations

import signal
import sys


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main(sys.argv)


if __name__ == "__main__":
    main()

"""Checks of a build asked to run on a ``dask.distributed`` cluster, made before anything is
written, each answered in one line.

Beam's Dask runner starts a local cluster of its own when ``--dask_client_address`` is left
out (a build meant for a cluster would then run on this machine without a word), waits 30 s
before it gives up on an address nobody answers, and accepts a partition size of 0. Here the
address must be given and must answer within a few seconds, and partitions must hold at least
one element.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

from beamtok._src.base.errors import ConfigError

__all__ = ["CONNECT_SECONDS", "check_dask_args", "lost_scheduler", "option_value", "scheduler_answers"]

CONNECT_SECONDS = 3.0


def option_value(args: Sequence[str], name: str) -> str | None:
    """The value of ``--name`` in ``args`` (``--name=value`` or ``--name value``), the last one given."""
    value = None
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            value = arg.split("=", 1)[1]
        elif arg == name and i + 1 < len(args):
            value = args[i + 1]
    return value


def check_dask_args(args: Sequence[str]) -> None:
    """Refuse a Dask build that would not run where it was asked to.

    Args:
        args: Beam's options, the runner already named in full.
    Raises:
        ConfigError: No scheduler address, one that does not answer, or a partition size or
            count below 1.
    """
    for name in ("--dask_partition_size", "--dask_npartitions"):
        value = option_value(args, name)
        if value is not None and (not value.strip().isdigit() or int(value) < 1):
            raise ConfigError(f"{name}={value}: a whole number of at least 1")
    address = option_value(args, "--dask_client_address")
    if not address:
        raise ConfigError(
            "--runner=DaskRunner needs --dask_client_address=HOST:PORT, the scheduler of a running dask.distributed "
            "cluster (without it Beam would start a local cluster of its own); to build on this machine, leave --runner out"
        )
    problem = scheduler_answers(address)
    if problem is not None:
        raise ConfigError(f"cannot reach the Dask scheduler at {address}: {problem}")


def scheduler_answers(address: str, timeout: float = CONNECT_SECONDS) -> str | None:
    """None when a TCP connection to the scheduler's ``[tcp://]HOST:PORT`` opens within
    ``timeout`` seconds; else why not.

    Args:
        address: The scheduler's address, as Dask writes it.
        timeout: Seconds to wait.
    """
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        return "the address must be HOST:PORT (or tcp://HOST:PORT)"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as e:
        return e.strerror or str(e)


def lost_scheduler(args: Sequence[str]) -> str | None:
    """Why a Dask build ended without its manifest when its scheduler no longer answers (it
    was lost during the build); None for another runner, or a scheduler still there.

    Args:
        args: Beam's options as given to the build.
    """
    runner = option_value(args, "--runner") or ""
    address = option_value(args, "--dask_client_address")
    if "dask" not in runner.lower() or not address:
        return None
    problem = scheduler_answers(address)
    if problem is None:
        return None
    return (
        f"the Dask scheduler at {address} was lost during the build ({problem}); the shards finished before it "
        "are kept: start the scheduler again and run the same command to build the rest"
    )

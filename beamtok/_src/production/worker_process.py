"""What a tokenization worker process of ``ParallelShards`` (``parallel.py``) runs: it rebuilds
the spec and tokenizers it is sent, then runs each shard it is given from its cursor, streaming
the rows back as column blocks, until told to stop; it exits by itself when its consumer dies.
With the widening of its result pipe, and the default number of workers."""

from __future__ import annotations

import os
import pickle
import queue
from typing import Any

from beamtok._src.production.shard_spans import shard_spans
from beamtok._src.production.wire import span_to_wire
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.transforms.tokenizer_registry import register_serialized

__all__ = ["PIPE_BYTES", "default_workers", "widen_pipe", "worker_main"]

PIPE_BYTES = 1 << 20  # the buffer of a worker's result pipe (Linux's default ceiling for one pipe)
PARENT_CHECK_SECONDS = 1.0  # how often a waiting worker checks that its consumer is alive


def worker_main(payload: bytes, tasks: Any, results: Any, cancel: Any, done: Any) -> None:
    """A worker's life: ``payload`` is the cloudpickled spec and serialized tokenizers; tasks
    ``(task id, shard, cursor)`` come on ``tasks`` (None: stop), and ``("data" | "end" |
    "cancelled" | "error", task id, body)`` go back on ``results``."""
    import cloudpickle

    parent = os.getppid()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one core per worker; no Rayon pool after fork
    spec, blobs = cloudpickle.loads(payload)
    register_serialized(blobs)
    processor = ShardProcessor(spec)
    processor.prepare()

    def send(message: tuple[str, int, Any]) -> None:
        while True:  # a consumer killed without closing us must not leave us blocked forever
            try:
                results.put(message, timeout=PARENT_CHECK_SECONDS)
                return
            except queue.Full:
                _exit_if_orphaned(parent)

    while True:
        try:
            message = tasks.get(timeout=PARENT_CHECK_SECONDS)
        except queue.Empty:
            _exit_if_orphaned(parent)
            continue
        if message is None:
            return
        task_id, shard, cursor = message
        try:
            for span in shard_spans(processor, shard, cursor):
                if cancel.is_set():
                    break
                send(("data", task_id, span_to_wire(span)))
                _exit_if_orphaned(parent)
            if cancel.is_set():
                send(("cancelled", task_id, None))
            else:
                send(("end", task_id, None))
        except BaseException as e:  # everything reaches the consumer, which decides
            send(("error", task_id, _picklable(e)))
        done.value = task_id  # the consumer may give us the next shard before it reads our end


def _exit_if_orphaned(parent: int) -> None:
    if os.getppid() != parent:  # the consumer died (e.g. SIGKILL): nobody will read our output
        os._exit(0)


def _picklable(error: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


def widen_pipe(channel: Any) -> None:
    """Give a process queue's pipe ``PIPE_BYTES`` of buffer where the system allows (Linux).
    A block of rows is a few hundred KB; through the default 64 KB pipe each takes a dozen
    reads, each waiting for the worker's feeder thread to write the next 64 KB."""
    try:
        import fcntl
    except ImportError:  # Windows
        return
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    try:  # both ends share the one pipe buffer
        fcntl.fcntl(channel._reader.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:  # over the system's or the user's pipe limit: keep the default
        pass


def default_workers() -> int:
    """The worker processes ``parallel(None)`` starts: one a core this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))

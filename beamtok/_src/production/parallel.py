r"""Run the shard processing in worker processes, ahead of the consumer, in the same order.

:class:`ParallelShards` is a shard backend (see ``beamtok._src.production.protocol``): the shard source
opens shards through it instead of running ``ShardProcessor.run`` itself. Nothing starts
before the source's first ``next()``. Each open shard (and the next few the source will open) runs
in a worker process; the worker streams its examples back as column blocks (``RowSpan``\ s,
see ``beamtok._src.production.wire``: arrays, never a pickled dict per example) through a bounded
queue, and the source consumes them in exactly the order the in-process step yields them.
Because every item carries its cursor, taking a state never drains or pauses the workers.

Where workers are forked, the consumer builds the fast-path encoders before it forks them
(``build_encoders``), so the workers start with the encoder built and its tables shared.

A worker that dies raises a clear error in the consumer; an error in a worker (bad input) is
re-raised in the consumer as it would have been in-process.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from beamtok._src.base.errors import BeamtokError
from beamtok._src.core.spec import Spec, build_encoders
from beamtok._src.production.protocol import SequentialBackend
from beamtok._src.production.shard_spans import shard_spans
from beamtok._src.production.wire import span_from_wire
from beamtok._src.production.worker_process import widen_pipe, worker_main
from beamtok._src.shards.column_chunker import MAX_ROWS as COLUMN_BLOCK_ROWS
from beamtok._src.shards.column_chunker import packs_column_wise
from beamtok._src.shards.items import Produced, ShardCursor
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.shards.spans import RowSpan, SpanReader
from beamtok._src.sources.retrying import share_retry_counter
from beamtok._src.sources.urls import Shard
from beamtok._src.transforms.tokenizer_registry import resolve_tokenizer, serialize_tokenizers

__all__ = ["ParallelShards", "WorkerError", "queue_blocks"]

# How far a worker may run ahead of the consumer: blocks queued and not yet read. A worker that
# has started a shard the consumer will open next (a prefetch, or the next shard when one shard
# is open at a time) keeps working while the consumer reads another shard's rows, until its
# queue is full; a queue of ~8 M tokens holds a few-megabyte shard whole, so two workers stay
# busy on such shards without interleave(). A full queue is 40-70 MB of rows in their narrow
# wire types (2-4 bytes an id), held by a worker whose consumer is slower than it.
QUEUE_TOKENS = 8_000_000
MIN_QUEUE_BLOCKS = 16
MAX_QUEUE_BLOCKS = 512
POLL_SECONDS = 1.0


class WorkerError(BeamtokError):
    """A tokenization worker process died."""


@dataclass
class _Worker:
    process: Any
    tasks: Any
    results: Any
    cancel: Any
    done: Any  # the id of the last task this worker finished producing (shared memory)
    task: _Task | None = None  # the task it runs, or last ran while the consumer still reads it
    stopping: bool = False  # its task is being cancelled: give it nothing new until it has stopped


@dataclass
class _Task:
    id: int
    shard: Shard
    cursor: ShardCursor
    worker: _Worker | None = None
    buffer: deque[RowSpan] = field(default_factory=deque)
    finished: bool = False
    consuming: bool = False
    error: BaseException | None = None


class ParallelShards(SequentialBackend):
    """Opens shards for a ShardSource by running them in ``workers`` processes."""

    has_spans = True

    def __init__(self, spec: Spec, workers: int) -> None:
        if workers < 1:
            raise ValueError("ParallelShards needs at least one worker")
        self.spec = spec
        self.workers_wanted = workers
        self._workers: list[_Worker] = []
        self._tasks: dict[tuple[int, ShardCursor], _Task] = {}
        self._waiting: deque[_Task] = deque()
        self._live: dict[int, _Task] = {}  # dispatched tasks whose messages are still wanted
        self._upcoming: list[tuple[Shard, ShardCursor]] = []  # shards to start when a worker frees up
        self._next_id = 0
        self._local: ShardProcessor | None = None
        self.ran_here = 0  # shards run in the consumer's process because every worker was busy
        self.cancelled = 0  # started shards stopped before their end (prefetches nobody read)

    # --------------------------------------------------------------- backend API

    def open(self, shard: Shard, cursor: ShardCursor) -> Iterator[Produced]:
        return SpanReader(self.open_spans(shard, cursor))

    def open_spans(self, shard: Shard, cursor: ShardCursor) -> Iterator[RowSpan]:
        if cursor.done:
            return iter(())
        key = (shard.index, cursor)
        self._upcoming = [(s, c) for s, c in self._upcoming if (s.index, c) != key]
        task = self._tasks.pop(key, None) or self._submit(shard, cursor)
        task.consuming = True
        return self._consume(task)

    def prefetch(self, upcoming: Sequence[tuple[Shard, ShardCursor]]) -> None:
        """Start shards the source will open next, on workers that are free now or become
        free (done producing their shard) while the consumer still reads it."""
        if not self._workers:
            self._start()
        self._upcoming = [
            (shard, cursor)
            for shard, cursor in upcoming
            if not cursor.done and (shard.index, cursor) not in self._tasks
        ]
        self._top_up()

    def close(self) -> None:
        for worker in self._workers:
            if worker.process.is_alive():
                worker.cancel.set()
                try:
                    worker.tasks.put_nowait(None)
                except Exception:
                    pass
        for worker in self._workers:
            worker.process.join(timeout=2)
            if worker.process.is_alive():  # busy past its cancel check (a loaded machine): stop it, and wait
                worker.process.terminate()
                worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        self._workers.clear()
        self._tasks.clear()
        self._waiting.clear()
        self._live.clear()
        self._upcoming.clear()

    def __del__(self) -> None:
        if sys.is_finalizing():
            return
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ internals

    def _start(self) -> None:
        import cloudpickle

        # fork, as torch's DataLoader does: spawn would re-import the user's main script
        forking = "fork" in mp.get_all_start_methods()
        if forking:  # a forked worker finds the tokenizers (and encoders) this process holds
            for ref in self.spec.tokenizers:
                resolve_tokenizer(ref)
            build_encoders(self.spec)
            blobs = []
        else:
            blobs = serialize_tokenizers(self.spec.tokenizers)
        payload = cloudpickle.dumps((self.spec, blobs))
        share_retry_counter()  # workers' retried remote reads count in this process's stats
        context: Any = mp.get_context("fork" if forking else "spawn")
        for _ in range(self.workers_wanted):
            tasks, results, cancel = context.Queue(), context.Queue(maxsize=queue_blocks(self.spec)), context.Event()
            widen_pipe(results)
            done = context.Value("q", -1, lock=False)
            process = context.Process(target=worker_main, args=(payload, tasks, results, cancel, done), daemon=True)
            process.start()
            self._workers.append(_Worker(process, tasks, results, cancel, done))

    def _free_worker(self) -> _Worker | None:
        if not self._workers:
            self._start()
        return self._idle_worker()

    def _idle_worker(self) -> _Worker | None:
        """A worker waiting for a task: it has none, or has produced all of its task (whose
        last blocks may still wait in its queue: the next task's come after them)."""
        for worker in self._workers:
            if not worker.stopping and (worker.task is None or worker.done.value == worker.task.id):
                return worker
        return None

    def _new_task(self, shard: Shard, cursor: ShardCursor) -> _Task:
        task = _Task(self._next_id, shard, cursor)
        self._next_id += 1
        return task

    def _submit(self, shard: Shard, cursor: ShardCursor) -> _Task:
        task = self._new_task(shard, cursor)
        worker = self._free_worker()
        if worker is None:
            self._waiting.append(task)
        else:
            self._dispatch(task, worker)
        return task

    def _dispatch(self, task: _Task, worker: _Worker) -> None:
        task.worker, worker.task = worker, task
        self._live[task.id] = task
        worker.tasks.put((task.id, task.shard, task.cursor))

    def _top_up(self) -> None:
        """Give idle workers the waiting tasks, then the shards the source opens next."""
        while True:
            worker = self._idle_worker()
            if worker is None:
                return
            if self._waiting:
                task = self._waiting.popleft()
                if not task.finished:
                    self._dispatch(task, worker)
                continue
            while self._upcoming:
                shard, cursor = self._upcoming.pop(0)
                if (shard.index, cursor) not in self._tasks:
                    task = self._tasks[(shard.index, cursor)] = self._new_task(shard, cursor)
                    self._dispatch(task, worker)
                    break
            else:
                return

    def _finish(self, task: _Task, kind: str, body: Any) -> None:
        """A task's last message arrived: it is finished, and its worker free if it ran it
        (the callers of ``_route`` then give free workers their next task)."""
        task.finished = True
        if kind == "error":
            task.error = body
        self._live.pop(task.id, None)
        worker = task.worker
        if worker is not None and worker.task is task:
            worker.task = None

    def _route(self, kind: str, task_id: int, body: Any) -> _Task | None:
        """File a worker's message with its task (a worker's tasks follow one another in
        its queue); the messages of cancelled tasks are dropped."""
        owner = self._live.get(task_id)
        if owner is None:
            return None
        if kind == "data":
            owner.buffer.append(span_from_wire(body))
        else:
            self._finish(owner, kind, body)
        return owner

    def _consume(self, task: _Task) -> Iterator[RowSpan]:
        try:
            while True:
                while task.buffer:
                    yield task.buffer.popleft()
                if task.error is not None:
                    raise task.error
                if task.finished:
                    return
                if task.worker is None and not self._make_room(task):
                    # every worker serves another open shard: run this one here, identically
                    if task in self._waiting:
                        self._waiting.remove(task)
                    task.finished = True
                    self.ran_here += 1
                    if self._local is None:
                        self._local = ShardProcessor(self.spec)
                    yield from shard_spans(self._local, task.shard, task.cursor)
                    return
                if task.worker is not None:
                    self._receive(task)
        finally:
            if not task.finished and not sys.is_finalizing():
                self._cancel(task)
            self._live.pop(task.id, None)

    def _make_room(self, task: _Task) -> bool:
        """Give a waiting, consumed task a worker, cancelling a prefetched task nobody reads
        yet if need be. False when every worker serves a shard being consumed."""
        worker = self._free_worker()
        if worker is None:
            for key, other in list(self._tasks.items()):
                if other.worker is not None and other.worker.task is other and not other.consuming:
                    del self._tasks[key]
                    self._cancel(other)
                    break
            worker = self._free_worker()
        if worker is None:
            return False
        if task in self._waiting:
            self._waiting.remove(task)
        self._dispatch(task, worker)
        return True

    def _receive(self, task: _Task) -> None:
        worker = task.worker
        assert worker is not None
        while True:
            try:
                kind, task_id, body = worker.results.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if not worker.process.is_alive():
                    code = worker.process.exitcode
                    raise WorkerError(
                        f"tokenization worker (pid {worker.process.pid}) died with exit code {code} while reading {task.shard.url}"
                    ) from None
                continue
            owner = self._route(kind, task_id, body)
            if self._waiting or self._upcoming:
                self._top_up()  # a worker may have produced all of its shard meanwhile
            if owner is task:
                return

    def _cancel(self, task: _Task) -> None:
        task.finished = True
        if task in self._waiting:
            self._waiting.remove(task)
        self._live.pop(task.id, None)  # its messages still queued are dropped when read
        worker = task.worker
        if worker is None or worker.task is not task:
            return
        if worker.done.value == task.id:  # produced in full already: nothing to stop
            worker.task = None
            self._top_up()
            return
        self.cancelled += 1
        worker.stopping = True
        worker.cancel.set()
        while worker.process.is_alive():
            try:
                kind, task_id, body = worker.results.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            if task_id == task.id:
                if kind != "data":
                    break
                continue
            self._route(kind, task_id, body)  # the end of an earlier task of this worker
        worker.cancel.clear()
        worker.stopping = False
        worker.task = None
        self._top_up()


def queue_blocks(spec: Spec) -> int:
    """How many blocks a worker may queue ahead of the consumer: ``QUEUE_TOKENS`` in blocks of
    rows cut column-wise (``column_chunker.MAX_ROWS`` rows of ``seq_len``), else
    ``MIN_QUEUE_BLOCKS`` (rows of other lengths come in blocks of up to ``wire.MAX_ROWS``)."""
    pack = spec.pack
    if not (spec.tokenized and packs_column_wise(pack)):
        return MIN_QUEUE_BLOCKS
    assert pack is not None and pack.seq_len is not None
    return max(MIN_QUEUE_BLOCKS, min(MAX_QUEUE_BLOCKS, QUEUE_TOKENS // (COLUMN_BLOCK_ROWS * pack.seq_len)))

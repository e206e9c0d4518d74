"""One build at a time per cache directory: a lock file with a heartbeat and a stale rule.

``build.lock`` at the cache root names the run holding it (host, pid, start) and is rewritten
every ``HEARTBEAT_SECONDS`` while the build runs. Another ``beamtok cache`` run on the same
directory is refused with a message naming the holder, unless the lock is stale: its process
is gone (a lock written from this host, wherever the cache lives), or its heartbeat is older
than ``STALE_SECONDS`` (another host's, whose process cannot be looked up). A stale lock is taken over, saying so.

On a local disk the lock is created with ``O_EXCL``, so of two runs starting together exactly
one gets it, and a stale lock is taken over while the run holds an exclusive ``flock`` on the
cache directory: reading the holder, deleting it and creating the new lock are one step, so two
runs that both saw the same stale holder cannot both take it over. Object stores have no exclusive create: the lock is written, read back, and the
run proceeds only if it reads its own token. Two runs racing within one round trip can still
both start there; the one whose lock was overwritten logs an error at its next heartbeat.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from beamtok._src.base.errors import CacheError
from beamtok._src.cache.format.storage import Storage

__all__ = ["HEARTBEAT_SECONDS", "LOCK_FILE", "STALE_SECONDS", "BuildLock", "refuse_if_building", "release_held_locks"]

LOCK_FILE = "build.lock"
HEARTBEAT_SECONDS = 30.0
STALE_SECONDS = 600.0

log = logging.getLogger(__name__)

_HELD: set[BuildLock] = set()


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


class BuildLock:
    """The build lock of one cache directory; use as a context manager around a build."""

    def __init__(
        self, storage: Storage, *, heartbeat: float = HEARTBEAT_SECONDS, stale_after: float = STALE_SECONDS
    ) -> None:
        self.storage = storage
        self.heartbeat = heartbeat
        self.stale_after = stale_after
        self.token = uuid.uuid4().hex
        self.started = time.time()
        self.taken_over: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- holder

    def _record(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": self.started,
            "heartbeat": time.time(),
        }

    def _read(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.storage.read_bytes(LOCK_FILE))
        except CacheError:
            return None  # gone since it was seen
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {"token": None, "unreadable": True, "heartbeat": 0.0}
        return data if isinstance(data, dict) else {"token": None, "unreadable": True, "heartbeat": 0.0}

    def stale_reason(self, holder: dict[str, Any]) -> str | None:
        """Why the lock ``holder`` wrote no longer counts, or None while it does."""
        if holder.get("unreadable"):
            return "it is unreadable"
        pid, host = holder.get("pid"), holder.get("host")
        if host == socket.gethostname() and isinstance(pid, int) and not _process_alive(pid):
            return f"its process {pid} on this host is gone"
        age = time.time() - float(holder.get("heartbeat") or 0.0)
        if age > self.stale_after:
            return f"its last heartbeat was {age:.0f}s ago (stale after {self.stale_after:.0f}s)"
        return None

    def _refusal(self, holder: dict[str, Any]) -> CacheError:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(holder.get("started") or 0)))
        beat = time.time() - float(holder.get("heartbeat") or 0.0)
        return CacheError(
            f"{self.storage.url} is being written by another `beamtok cache` run (pid {holder.get('pid')} on "
            f"{holder.get('host')}, since {since}, heartbeat {beat:.0f}s ago); wait for it to finish, or if that run is "
            f"gone remove {self.storage.display(LOCK_FILE)} (a lock whose heartbeat stops for {self.stale_after:.0f}s "
            f"is taken over)"
        )

    # ---------------------------------------------------------------- acquire

    def acquire(self) -> None:
        with self._exclusive():
            self._acquire()
        self._thread = threading.Thread(target=self._beat, name="beamtok-build-lock", daemon=True)
        self._thread.start()
        _HELD.add(self)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Other runs on this machine wait here while this one reads, takes over or creates the
        lock (a ``flock`` on the cache directory; object stores have none)."""
        if not self.storage.is_local:
            yield
            return
        directory = self.storage.root
        os.makedirs(directory, exist_ok=True)
        fd = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def _acquire(self) -> None:
        holder = self._read()
        if holder is not None:
            reason = self.stale_reason(holder)
            if reason is None:
                raise self._refusal(holder)
            log.warning(
                "%s: taking over the build lock of pid %s on %s: %s",
                self.storage.url,
                holder.get("pid"),
                holder.get("host"),
                reason,
            )
            self.taken_over = holder
            self.storage.delete(LOCK_FILE)
        if not self._create():
            current = self._read()
            raise self._refusal(current or {})

    def _create(self) -> bool:
        blob = json.dumps(self._record()).encode()
        if self.storage.is_local:
            path = self.storage.path(LOCK_FILE)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            return True
        self.storage.write_bytes(LOCK_FILE, blob)
        current = self._read()
        return current is not None and current.get("token") == self.token

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            current = self._read()
            if current is None or current.get("token") != self.token:
                log.error(
                    "%s: the build lock was taken by another run; this run's files may be replaced", self.storage.url
                )
                return
            try:
                self.storage.write_bytes(LOCK_FILE, json.dumps(self._record()).encode())
            except OSError as e:  # a full disk must not kill the build from this thread
                log.warning("%s: cannot refresh the build lock: %s", self.storage.url, e)

    # ---------------------------------------------------------------- release

    def release(self) -> None:
        _HELD.discard(self)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        current = self._read()
        if current is not None and current.get("token") == self.token:
            self.storage.delete(LOCK_FILE)

    def __enter__(self) -> BuildLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def release_held_locks() -> None:
    """Release every build lock this process holds (for a process about to end abruptly)."""
    for lock in list(_HELD):
        try:
            lock.release()
        except Exception as e:  # the process is ending: say so, and go on with the others
            log.warning("%s: cannot release the build lock: %s", lock.storage.url, e)


def refuse_if_building(output: str) -> None:
    """Refuse at once when a live build holds ``output``'s lock, so a second ``beamtok cache``
    learns it cannot start before importing Beam or loading tokenizers. It only reads the lock:
    the build takes it when it starts (and refuses then too, should a build start meanwhile)."""
    storage = Storage(output)
    if storage.size(LOCK_FILE) is None:
        return
    probe = BuildLock(storage)
    holder = probe._read()
    if holder is not None and not holder.get("unreadable") and probe.stale_reason(holder) is None:
        raise probe._refusal(holder)

"""Remote reads that survive a flaky network: a read that fails with a transient error (HTTP
429 or 5xx, a reset or dropped connection, a body cut short) is retried with exponential
backoff, reopening the object at the byte it had reached (an HTTP Range request), so nothing is
read twice or skipped. Errors that retrying cannot fix (404, 403...) are raised at once.

Retries are counted per process in shared memory that tokenization workers (forked) share, so
``DatasetIterator.stats()["remote_retries"]`` sees theirs too.
"""

from __future__ import annotations

import io
import logging
import multiprocessing
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import IO, Any
from urllib.parse import urlsplit

from beamtok._src.base.errors import InputError

__all__ = ["RETRIES", "RetryingReader", "count_retry", "remote_retries", "share_retry_counter"]

RETRIES = 5  # attempts after the first
BACKOFF_SECONDS = 0.5  # the first wait; it doubles each time, up to MAX_BACKOFF_SECONDS
MAX_BACKOFF_SECONDS = 8.0
READ_BYTES = 1 << 18  # read in pieces: a connection cut mid-body loses at most one piece, re-read from its start

log = logging.getLogger(__name__)
_LOCK = threading.Lock()
_COUNTER: Any = None  # a multiprocessing.Value made before workers fork, or an int
_NO_RANGES: set[str] = set()  # servers found to ignore Range requests (said once each)


def share_retry_counter() -> None:
    """Put the retry count in memory that processes forked from now on share."""
    global _COUNTER
    with _LOCK:
        if _COUNTER is None or isinstance(_COUNTER, int):
            start = _COUNTER or 0
            _COUNTER = multiprocessing.get_context("fork").Value("q", start)


def count_retry() -> None:
    global _COUNTER
    with _LOCK:
        if _COUNTER is None or isinstance(_COUNTER, int):
            _COUNTER = (_COUNTER or 0) + 1
            return
    with _COUNTER.get_lock():
        _COUNTER.value += 1


def remote_retries() -> int:
    """Transient remote read errors retried by this process and its tokenization workers."""
    with _LOCK:
        counter = _COUNTER
    return int(counter or 0) if counter is None or isinstance(counter, int) else int(counter.value)


def transient(error: BaseException) -> bool:
    """Whether retrying may cure ``error``: throttling, a server error, a broken connection or a
    body cut short (not a missing or forbidden object)."""
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    if status is not None:
        return status == 429 or status >= 500
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & {
        "ConnectionError",
        "ChunkedEncodingError",
        "ProtocolError",
        "IncompleteRead",
        "ReadTimeoutError",
        "Timeout",
        "ContentDecodingError",
    }:
        return True
    return isinstance(error, (ConnectionError, TimeoutError)) or (
        isinstance(error, OSError) and "Connection broken" in str(error)
    )


class RetryingReader(io.RawIOBase):
    """A remote object read from a byte position, reopened there after a transient error.

    ``open_at(position)`` opens the object and positions it (a Range request)."""

    def __init__(self, url: str, open_at: Callable[[int], IO[bytes]]) -> None:
        self.url = url
        self._open_at = open_at
        self._position = 0
        self._raw: IO[bytes] | None = self._attempt(lambda: open_at(0))

    def _attempt(self, action: Callable[[], Any]) -> Any:
        wait = BACKOFF_SECONDS
        for attempt in range(RETRIES + 1):
            try:
                return action()
            except Exception as error:
                if not transient(error):
                    raise
                if attempt == RETRIES:
                    raise InputError(
                        f"{self.url}: still failing after {RETRIES} retries at byte {self._position:,}: {type(error).__name__}: {error}"
                    ) from error
                count_retry()
                log.info(
                    "%s: %s at byte %d; retry %d in %.1fs",
                    self.url,
                    type(error).__name__,
                    self._position,
                    attempt + 1,
                    wait,
                )
                self._drop()
                time.sleep(wait)
                wait = min(wait * 2, MAX_BACKOFF_SECONDS)
        raise AssertionError("unreachable")

    def _drop(self) -> None:
        raw, self._raw = getattr(self, "_raw", None), None
        if raw is not None:
            try:
                raw.close()
            except Exception:  # a broken connection may fail to close; it is dropped either way
                if not sys.is_finalizing():  # at interpreter exit logging itself may be gone
                    log.debug("%s: closing a failed connection", self.url, exc_info=True)

    def _read(self, size: int) -> bytes:
        if self._raw is None:
            self._raw = self._reopen(self._position)
        return self._raw.read(size)

    def _reopen(self, position: int) -> IO[bytes]:
        """The object opened at ``position``; from a server that ignores Range requests, opened
        at its start and read forward to ``position`` (said once per server)."""
        try:
            return self._open_at(position)
        except io.UnsupportedOperation:
            if position == 0:
                raise
        server = urlsplit(self.url).netloc
        if server not in _NO_RANGES:
            _NO_RANGES.add(server)
            warnings.warn(
                f"{server} ignores HTTP Range requests: resuming {self.url} reads it forward from its start to byte "
                f"{position:,} (and so every later resume there); a server with Range support, or a local or object-store "
                "copy, seeks instead",
                stacklevel=2,
            )
        raw = self._open_at(0)
        left = position
        while left:
            piece = raw.read(min(left, READ_BYTES))
            if not piece:
                raise InputError(
                    f"{self.url}: the object ends before byte {position:,}, where the state says reading stopped"
                )
            left -= len(piece)
        return raw

    def readinto(self, buffer: Any) -> int:
        data = self._attempt(lambda: self._read(min(len(buffer), READ_BYTES)))
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._position
        elif whence == io.SEEK_END:
            self._drop()
            raw = self._attempt(lambda: self._open_at(0))
            self._position = raw.seek(offset, io.SEEK_END)
            self._raw = raw
            return self._position
        if offset != self._position:
            self._drop()  # reopened there at the next read
            self._position = offset
        return self._position

    def close(self) -> None:
        self._drop()
        super().close()

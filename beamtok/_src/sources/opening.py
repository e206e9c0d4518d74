"""Opening a local path or a remote URL for binary reading, decompressing on request."""

from __future__ import annotations

import gzip
import io
import lzma
from typing import IO, cast

from beamtok._src.base.errors import InputError
from beamtok._src.sources.retrying import RetryingReader
from beamtok._src.sources.urls import is_remote, local_path, nearest_name
from beamtok._src.sources.zstd_stream import ZstdReader

__all__ = ["COMPRESSED_SUFFIXES", "is_compressed", "open_url"]

COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".xz")
LOCAL_BUFFER = 1 << 20


def is_compressed(url: str) -> bool:
    return url.lower().endswith(COMPRESSED_SUFFIXES)


def open_url(url: str, *, decompress: bool) -> IO[bytes]:
    """Open a local path or remote URL for binary reading, with a clear error if it cannot be.

    With ``decompress``, .gz/.zst/.bz2/.xz files are decompressed as a stream. Local files
    are opened directly: importing smart_open (and the cloud clients it registers) costs a
    quarter of a second in every process that opens its first file.
    """
    try:
        raw: IO[bytes]
        if "://" not in url or url.startswith("file://"):
            # a large buffer: lines of long documents are read much faster than through the default 8 KiB
            raw = open(local_path(url), "rb", buffering=LOCAL_BUFFER)
        else:
            raw = _open_remote(url)
    except FileNotFoundError as e:
        raise InputError(f"{url}: file not found{nearest_name(local_path(url)) if not is_remote(url) else ''}") from e
    except PermissionError as e:
        raise InputError(f"{url}: permission denied") from e
    except OSError as e:
        raise InputError(f"{url}: cannot open: {e}") from e
    except Exception as e:  # remote clients raise their own types (botocore, requests, ...)
        if is_remote(url):
            raise InputError(f"{url}: cannot open: {type(e).__name__}: {e}") from e
        raise
    return _decompressed(url, raw) if decompress else raw


def _open_remote(url: str) -> IO[bytes]:
    """A remote object through smart_open, reopened where it was after a transient error
    (``beamtok._src.sources.retrying``)."""
    import smart_open

    def open_at(position: int) -> IO[bytes]:
        # smart_open's seek checks the server answered the range (206 from that byte)
        raw = cast(IO[bytes], smart_open.open(url, "rb", compression="disable"))
        if position:
            raw.seek(position)
        return raw

    return io.BufferedReader(RetryingReader(url, open_at), buffer_size=1 << 20)


def _decompressed(url: str, raw: IO[bytes]) -> IO[bytes]:
    name = url.lower()
    if name.endswith(".gz"):
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    if name.endswith((".zst", ".zstd")):
        return io.BufferedReader(ZstdReader(raw), buffer_size=1 << 20)
    if name.endswith(".bz2"):
        import bz2

        return bz2.BZ2File(raw)
    if name.endswith(".xz"):
        return lzma.LZMAFile(raw)
    return raw

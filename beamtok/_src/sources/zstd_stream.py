"""A zstd decompressing reader that notices a file cut short.

``zstandard``'s own stream reader returns end-of-file when its input ends in the middle of a
frame, so a truncated ``.zst`` shard would read as a shorter (or empty) shard without a word.
This reader decompresses frame after frame and raises ``EOFError`` if the input ends inside
one, the way ``gzip``, ``bz2`` and ``lzma`` do.
"""

from __future__ import annotations

import io
from typing import IO, Any

__all__ = ["ZstdReader"]

READ_BYTES = 1 << 20


class ZstdReader(io.RawIOBase):
    """Decompress a (possibly multi-frame) zstd stream from ``raw``."""

    def __init__(self, raw: IO[bytes]) -> None:
        import zstandard

        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame: Any = self._decompressor.decompressobj()
        self._in_frame = False  # bytes of the current frame have been fed
        self._out = b""
        self._pos = 0
        self._input_done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._pos >= len(self._out) and not self._input_done:
            chunk = self._raw.read(READ_BYTES)
            if not chunk:
                self._input_done = True
                if self._in_frame and not self._frame.eof:
                    raise EOFError("zstd input ended inside a frame (the file is truncated)")
                break
            self._out, self._pos = self._decompress(chunk), 0
        n = min(len(buffer), len(self._out) - self._pos)
        buffer[:n] = self._out[self._pos : self._pos + n]
        self._pos += n
        return n

    def _decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            if self._frame.eof:
                self._frame = self._decompressor.decompressobj()
            self._in_frame = True
            out.append(self._frame.decompress(data))
            data = self._frame.unused_data if self._frame.eof else b""
        return b"".join(out)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()

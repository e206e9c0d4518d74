"""Files of a cache directory on a local disk or an object store (gs://, s3://).

Local writes go to a temporary name and are renamed into place, so no reader ever sees half a
file. On object stores an upload becomes visible only when complete, so files are written
under their final name.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

import pyarrow.fs as pafs

from beamtok._src.base.errors import CacheError

__all__ = ["HashingWriter", "Storage", "check_relative"]


def check_relative(path: str) -> str:
    """Refuse a path that would leave the cache directory (absolute, or with '..')."""
    parts = path.replace("\\", "/").split("/")
    if path.startswith(("/", "\\")) or ":" in parts[0] or ".." in parts or not path:
        raise CacheError(f"manifest names {path!r}, a path outside the cache directory")
    return path


CHUNK_BYTES = 8 << 20


class Storage:
    """A cache root directory and the filesystem it lives on."""

    def __init__(self, root: str) -> None:
        self.url = root.rstrip("/")
        if "://" in root and not root.startswith("file://"):
            from beamtok._src.cache.format.object_store import filesystem_for

            self.fs, self.root = filesystem_for(self.url)
            self.is_local = False
        else:
            self.fs = pafs.LocalFileSystem()
            self.root = os.path.abspath(root[len("file://") :] if root.startswith("file://") else root)
            self.is_local = True

    def path(self, rel: str) -> str:
        return f"{self.root}/{check_relative(rel)}"

    def display(self, rel: str) -> str:
        return f"{self.url}/{rel}"

    def size(self, rel: str) -> int | None:
        """Size in bytes, or None when the file does not exist."""
        info = self.fs.get_file_info(self.path(rel))
        return info.size if info.type == pafs.FileType.File else None

    def exists(self, rel: str) -> bool:
        return self.size(rel) is not None

    def list(self, rel_dir: str) -> list[str]:
        return sorted(self.sizes(rel_dir))

    def parquet_footer_sha256(self, rel: str) -> str:
        """SHA-256 of a Parquet file's footer (metadata, its length and the magic): two small
        reads, so every open can check the metadata that page CRCs do not cover."""
        with self.fs.open_input_file(self.path(rel)) as f:
            size = f.size()
            if size < 12:
                raise CacheError(f"{self.display(rel)}: too short to be a Parquet file")
            f.seek(size - 8)
            tail = f.read(8)
            length = int.from_bytes(tail[:4], "little")
            if tail[4:] != b"PAR1" or length > size - 12:
                raise CacheError(f"{self.display(rel)}: no valid Parquet footer")
            f.seek(size - 8 - length)
            return hashlib.sha256(f.read(length) + tail).hexdigest()

    def sha256(self, rel: str, on_read: Callable[[int], None] | None = None) -> str:
        """SHA-256 of a whole file, read in chunks (``on_read`` gets each chunk's size)."""
        digest = hashlib.sha256()
        with self.open_input(rel) as f:
            while chunk := f.read(CHUNK_BYTES):
                digest.update(chunk)
                if on_read is not None:
                    on_read(len(chunk))
        return digest.hexdigest()

    def sizes(self, rel_dir: str) -> dict[str, int]:
        """File name -> size in bytes, for the files directly in ``rel_dir`` (one listing call)."""
        if self.is_local:  # scandir holds no object per file beyond its entry: a 100,000-shard listing stays small
            try:
                with os.scandir(self.path(rel_dir)) as entries:
                    return {e.name: e.stat().st_size for e in entries if e.is_file(follow_symlinks=False)}
            except FileNotFoundError:
                return {}
        selector = pafs.FileSelector(self.path(rel_dir), allow_not_found=True)
        return {
            info.base_name: info.size for info in self.fs.get_file_info(selector) if info.type == pafs.FileType.File
        }

    def read_buffer(self, rel: str) -> Any:
        """A file's bytes as a pyarrow buffer, without a copy into Python bytes (a local
        file is memory-mapped)."""
        import pyarrow as pa

        if self.is_local:
            with pa.memory_map(self.path(rel)) as f:
                return f.read_buffer()
        with self.fs.open_input_stream(self.path(rel)) as f:
            return f.read_buffer()

    def read_bytes(self, rel: str) -> bytes:
        try:
            with self.fs.open_input_stream(self.path(rel)) as f:
                return bytes(f.read())
        except FileNotFoundError as e:
            raise CacheError(f"{self.display(rel)}: missing") from e

    def open_input(self, rel: str) -> Any:
        """A random-access file (for Parquet readers)."""
        try:
            return self.fs.open_input_file(self.path(rel))
        except FileNotFoundError as e:
            raise CacheError(f"{self.display(rel)}: shard file is missing") from e

    @contextmanager
    def writing(self, rel: str) -> Iterator[IO[bytes]]:
        """Write ``rel`` so that it appears complete or not at all."""
        if self.is_local:
            os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
        target = f"{rel}.tmp-{uuid.uuid4().hex[:8]}" if self.is_local else rel
        stream = self.fs.open_output_stream(self.path(target))
        try:
            yield stream
            stream.close()
        except BaseException:
            stream.close()
            if self.is_local:
                self.fs.delete_file(self.path(target))
            raise
        if self.is_local:
            os.replace(self.path(target), self.path(rel))

    def write_bytes(self, rel: str, data: bytes) -> None:
        with self.writing(rel) as f:
            f.write(data)

    def delete(self, rel: str) -> None:
        if self.exists(rel):
            self.fs.delete_file(self.path(rel))

    def remove_empty_dir(self, rel_dir: str) -> None:
        """Remove a directory left empty (on an object store: the marker object pyarrow
        leaves when the last file under a prefix is deleted)."""
        if self.is_local:
            try:
                os.rmdir(self.path(rel_dir))
            except OSError:
                pass  # absent, or not empty
        elif not self.sizes(rel_dir) and self.fs.get_file_info(self.path(rel_dir)).type == pafs.FileType.Directory:
            self.fs.delete_dir(self.path(rel_dir))

    def delete_stale_temporaries(self, rel_dir: str) -> None:
        """Remove temporary files a killed run left behind (never visible under final names)."""
        for name in self.list(rel_dir):
            if ".tmp-" in name:
                self.delete(f"{rel_dir}/{name}")


class HashingWriter:
    """A write-only file that forwards bytes and keeps their SHA-256 and count."""

    def __init__(self, sink: IO[bytes]) -> None:
        self.sink = sink
        self.sha256 = hashlib.sha256()
        self.bytes = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.bytes += len(data)
        self.sink.write(data)
        return len(data)

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        self.sink.flush()

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

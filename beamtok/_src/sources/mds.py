"""MosaicML Streaming datasets (MDS shards) read as beamtok shards, without the streaming package.

An MDS dataset is a directory (local or remote) holding ``index.json`` and shard files. Each
shard file starts with its sample count and a table of sample offsets, so a reader seeks to any
sample in O(1): the doc cursor of an MDS shard is the sample index inside it. A sample is the
sizes of its variable-width columns (4 bytes each) followed by every column's bytes, in the
index's column order. A compressed shard (``.mds.zstd``, ``.gz``, ``.bz2``, ``.br``,
``.snappy``) is one compressed blob and is decompressed whole.

Columns are decoded by their MDS encoding: text, bytes, numbers and JSON. Pickled columns are
refused (unpickling runs code from the data); image and array columns are left out of the
records unless asked for by name, which is refused.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import itertools
import json
import os
import posixpath
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import IO, Any

import numpy as np

from beamtok._src.base.errors import ConfigError, InputError, StateError
from beamtok._src.sources.documents import ParseFailure, RawDocument, SkipReason
from beamtok._src.sources.opening import open_url
from beamtok._src.sources.urls import is_remote

__all__ = ["MDS_SUFFIXES", "is_mds_url", "mds_shard_urls", "read_mds"]

INDEX_NAME = "index.json"
MDS_SUFFIXES = (".mds", ".mds.zstd", ".mds.gz", ".mds.bz2", ".mds.br", ".mds.snappy")
# How far above a shard file its dataset's index.json may sit (merged indexes list shards
# under subdirectories).
INDEX_SEARCH_DEPTH = 3


def _utf8(data: bytes) -> str:
    return data.decode("utf-8")


def _scalar(dtype: str) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        return np.frombuffer(data, dtype).item()

    return decode


DECODERS: dict[str, Callable[[bytes], Any]] = {
    "bytes": bytes,
    "str": _utf8,
    "int": _scalar("<i8"),
    "str_int": lambda b: int(_utf8(b)),
    "str_float": lambda b: float(_utf8(b)),
    "str_decimal": lambda b: str(Decimal(_utf8(b))),  # kept as its exact decimal text
    "json": lambda b: json.loads(_utf8(b)),
    **{name: _scalar("<" + code) for name, code in (
        ("uint8", "u1"), ("uint16", "u2"), ("uint32", "u4"), ("uint64", "u8"),
        ("int8", "i1"), ("int16", "i2"), ("int32", "i4"), ("int64", "i8"),
        ("float16", "f2"), ("float32", "f4"), ("float64", "f8"),
    )},
}  # fmt: skip
UNSAFE_ENCODINGS = ("pkl",)


def is_mds_url(url: str) -> bool:
    return url.lower().endswith(MDS_SUFFIXES)


def _join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if is_remote(base) else os.path.join(base, *parts)


def _dirname(url: str) -> str:
    return posixpath.dirname(url) if is_remote(url) else os.path.dirname(url)


@dataclass(frozen=True)
class MdsShardInfo:
    """What ``index.json`` says about one shard file."""

    samples: int
    compression: str | None
    names: tuple[str, ...]
    encodings: tuple[str, ...]
    sizes: tuple[int | None, ...]
    raw_bytes: int

    @classmethod
    def from_entry(cls, entry: dict[str, Any], where: str) -> MdsShardInfo:
        if entry.get("format") != "mds" or entry.get("version") != 2:
            raise InputError(
                f"{where}: shard is format {entry.get('format')!r} version {entry.get('version')!r}; beamtok reads MDS version 2"
            )
        try:
            return cls(
                int(entry["samples"]),
                entry.get("compression") or None,
                tuple(entry["column_names"]),
                tuple(entry["column_encodings"]),
                tuple(entry["column_sizes"]),
                int(entry["raw_data"]["bytes"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{where}: malformed shard entry in index.json: {e!r}") from e

    def data_basename(self, entry: dict[str, Any]) -> str:
        return str((entry["zip_data"] if self.compression else entry["raw_data"])["basename"])


def _read_json(url: str) -> Any:
    with open_url(url, decompress=False) as f:
        data = f.read()
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{url}: not a JSON file: {e}") from e


def _index(index_url: str) -> dict[str, tuple[MdsShardInfo, str]]:
    """The shards an index lists: data file path (relative to the index) → (info, path).

    Parsed once per process and index (a local index again when the file changes)."""
    stamp = None
    if not is_remote(index_url):
        st = os.stat(index_url)
        stamp = (st.st_mtime_ns, st.st_size)
    return _parsed_index(index_url, stamp)


@functools.lru_cache(maxsize=64)
def _parsed_index(index_url: str, stamp: tuple[int, int] | None) -> dict[str, tuple[MdsShardInfo, str]]:
    data = _read_json(index_url)
    entries = data.get("shards") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(f"{index_url}: not an MDS index (no 'shards' list)")
    if data.get("version", 2) != 2:
        raise InputError(
            f"{index_url}: MDS index version {data.get('version')!r}; beamtok reads index version 2 (MosaicML Streaming's)"
        )
    shards: dict[str, tuple[MdsShardInfo, str]] = {}
    for i, entry in enumerate(entries):
        where = f"{index_url} shard {i}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object")
        info = MdsShardInfo.from_entry(entry, where)
        name = info.data_basename(entry)
        shards[os.path.normpath(name)] = (info, name)
    return shards


def mds_shard_urls(url: str, *, split: str | None = None) -> list[str]:
    """The shard files of the MDS dataset at ``url`` (a directory, or its ``index.json``), in
    the index's order; ``split`` names a subdirectory, as in Streaming's ``split=``."""
    index_url = url if url.endswith(INDEX_NAME) else _join(url, *([split] if split else []), INDEX_NAME)
    if not is_remote(index_url) and not os.path.isfile(index_url):
        raise InputError(f"{index_url}: no MDS index here (an MDS dataset directory holds index.json)")
    directory = _dirname(index_url)
    urls = [_join(directory, name) for _, name in _index(index_url).values()]
    if not urls:
        raise InputError(f"{index_url}: the index lists no shards")
    return urls


def _shard_info(url: str) -> MdsShardInfo:
    """Find the index listing ``url`` in its directory or one above it."""
    directory = _dirname(url)
    relative = os.path.basename(url)
    for _ in range(INDEX_SEARCH_DEPTH):
        index_url = _join(directory, INDEX_NAME)
        if is_remote(index_url) or os.path.isfile(index_url):
            try:
                shards = _index(index_url)
            except InputError:
                if not is_remote(index_url):
                    raise
                shards = {}  # no index at this level of the bucket
            found = shards.get(os.path.normpath(relative))
            if found is not None:
                return found[0]
        parent = _dirname(directory)
        if parent == directory:
            break
        relative = _join(os.path.basename(directory), relative)
        directory = parent
    raise InputError(f"{url}: no index.json in its directory or above it lists this MDS shard")


def _decompress(url: str, algorithm: str, data: bytes) -> bytes:
    name = algorithm.split(":", 1)[0]
    try:
        if name == "zstd":
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(data)
        if name == "gz":
            return gzip.decompress(data)
        if name == "bz2":
            return bz2.decompress(data)
        if name == "br":
            import brotli

            return bytes(brotli.decompress(data))
        if name == "snappy":
            import snappy

            return bytes(snappy.decompress(data))
    except ImportError as e:
        package = {"br": "Brotli", "snappy": "python-snappy"}[name]
        raise ConfigError(
            f"{url}: reading {name}-compressed MDS shards needs the {package} package (pip install {package})"
        ) from e
    except Exception as e:
        raise InputError(f"{url}: {name}-compressed shard is truncated or corrupt: {e}") from e
    raise InputError(f"{url}: unknown MDS compression {algorithm!r}")


def _columns_to_decode(url: str, info: MdsShardInfo, columns: Sequence[str] | None) -> list[bool]:
    """Which columns go into the records (all decodable ones, or those named)."""
    for name, encoding in zip(info.names, info.encodings):
        if encoding in UNSAFE_ENCODINGS and (columns is None or name in columns):
            raise InputError(
                f"{url}: column {name!r} is pickled ({encoding!r}); beamtok does not unpickle data (it runs code). "
                f"Read other columns with columns=[...] or rewrite the dataset with a str/json column"
            )
    if columns is None:
        return [encoding in DECODERS for encoding in info.encodings]
    missing = [c for c in columns if c not in info.names]
    if missing:
        raise InputError(f"{url}: MDS shard has no column(s) {missing}; it has {list(info.names)}")
    undecodable = [f"{n} ({e})" for n, e in zip(info.names, info.encodings) if n in columns and e not in DECODERS]
    if undecodable:
        raise ConfigError(
            f"{url}: cannot read column(s) {undecodable} as text or numbers; beamtok reads {sorted(DECODERS)}"
        )
    return [name in columns for name in info.names]


class MdsRecord(dict):
    """A sample's decoded columns; ``left_out`` says, by column name, why a column is not
    among them (an encoding beamtok does not decode), for the step that asks for it."""

    left_out: dict[str, str] = {}  # noqa: RUF012  (set per shard, never mutated)


def _left_out(info: MdsShardInfo, wanted: list[bool]) -> dict[str, str]:
    return {
        name: f"column {name!r} has MDS encoding {encoding!r}, which beamtok does not decode (it decodes {sorted(DECODERS)})"
        for name, encoding, keep in zip(info.names, info.encodings, wanted)
        if not keep and encoding not in DECODERS
    }


def _decode_sample(
    blob: bytes, info: MdsShardInfo, wanted: list[bool], left_out: dict[str, str] | None = None
) -> dict[str, Any] | ParseFailure:
    sizes: list[int] = []
    at = 0
    for size in info.sizes:
        if size is None:
            size = int.from_bytes(blob[at : at + 4], "little")
            at += 4
        sizes.append(size)
    if at + sum(sizes) != len(blob):
        return ParseFailure(
            SkipReason.TRUNCATED, f"column sizes add up to {at + sum(sizes)} bytes, the sample holds {len(blob)}"
        )
    record = MdsRecord()
    if left_out:
        record.left_out = left_out
    for name, encoding, size, keep in zip(info.names, info.encodings, sizes, wanted):
        if keep:
            value = blob[at : at + size]
            try:
                record[name] = DECODERS[encoding](value)
            except UnicodeDecodeError as e:
                return ParseFailure(SkipReason.INVALID_UTF8, f"column {name!r}: invalid UTF-8 at byte {e.start}")
            except json.JSONDecodeError as e:
                return ParseFailure(SkipReason.MALFORMED_JSON, f"column {name!r}: malformed JSON: {e.msg}")
            except ValueError as e:
                return ParseFailure(SkipReason.WRONG_TYPE, f"column {name!r} ({encoding}): {e}")
        at += size
    return record


class _ShardBytes:
    """A shard's bytes by range: a seekable file for raw shards (only the samples read are
    fetched), the decompressed blob for compressed ones."""

    def __init__(self, url: str, info: MdsShardInfo) -> None:
        self._file: IO[bytes] | None = None
        self._blob: bytes | None = None
        self._at = 0
        handle = open_url(url, decompress=False)
        if info.compression:
            with handle:
                self._blob = _decompress(url, info.compression, handle.read())
        else:
            self._file = handle

    def read(self, start: int, size: int) -> bytes:
        if self._blob is not None:
            return self._blob[start : start + size]
        assert self._file is not None
        if start != self._at:
            self._file.seek(start)
        data = self._file.read(size)
        self._at = start + len(data)
        return data

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def read_mds(url: str, start: int, columns: Sequence[str] | None) -> Iterator[RawDocument]:
    """Samples of the MDS shard ``url`` from sample ``start`` on (seeking, not scanning)."""
    info = _shard_info(url)
    wanted = _columns_to_decode(url, info, columns)
    left_out = _left_out(info, wanted)
    if start > info.samples:
        raise StateError(f"{url}: doc cursor (sample {start}) is past the end of the shard ({info.samples} samples)")
    data = _ShardBytes(url, info)
    try:
        head = data.read(0, 4)
        count = int.from_bytes(head, "little") if len(head) == 4 else -1
        if count != info.samples:
            raise InputError(
                f"{url}: shard holds {count} samples by its header, index.json says {info.samples}: not the file the index describes"
            )
        table = data.read(4 * (1 + start), 4 * (count + 1 - start))
        if len(table) != 4 * (count + 1 - start):
            raise InputError(f"{url}: shard is truncated inside its offset table")
        offsets = np.frombuffer(table, "<u4").tolist()
        for i, (begin, end) in enumerate(itertools.pairwise(offsets), start):
            blob = data.read(begin, end - begin) if end >= begin else b""
            if end < begin or len(blob) != end - begin:
                yield RawDocument(
                    i, f"sample {i}", ParseFailure(SkipReason.TRUNCATED, "shard is truncated or corrupt here")
                )
                return
            yield RawDocument(i, f"sample {i}", _decode_sample(blob, info, wanted, left_out))
    finally:
        data.close()

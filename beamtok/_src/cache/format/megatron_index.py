"""Megatron-Core's indexed dataset on disk: ``PREFIX.bin`` holds every document's token ids
end to end, ``PREFIX.idx`` says where each one lies. The layout, as
``megatron.core.datasets.indexed_dataset`` reads it (little-endian):

- the magic ``MMIDIDX\\x00\\x00``, the version (``<Q`` 1) and the ids' dtype code (``<B``: 8
  for uint16, chosen where the vocabulary is under 65,500; 4 for int32 otherwise);
- the sequence count and the document count (``<Q`` each);
- each sequence's length (int32), each sequence's byte offset into the ``.bin`` (int64), and
  the document indices (int64: 0, then the sequence count after each document).

beamtok writes one sequence a document (Megatron's ``preprocess_data.py`` without
``--split-sentences``), so the document indices are ``0, 1, ..., n``. A shard's part is
written by :class:`MegatronPart`; :func:`merge_parts` joins the parts in shard order, as
Megatron's builder joins indexes (``add_index``).
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np

from beamtok._src.base.errors import CacheError

__all__ = ["HEADER", "MegatronPart", "merge_parts", "optimal_dtype", "read_index", "write_index"]

HEADER = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES: dict[np.dtype[Any], int] = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}
SMALL_VOCABULARY = 65_500  # Megatron's bound for uint16 ids


def optimal_dtype(vocab_size: int) -> np.dtype[Any]:
    """The dtype Megatron's builder stores ids of this vocabulary in: uint16 under 65,500
    entries, int32 otherwise."""
    return np.dtype(np.uint16 if vocab_size < SMALL_VOCABULARY else np.int32)


def write_index(path: str, dtype: np.dtype[Any], sequence_lengths: np.ndarray, document_indices: np.ndarray) -> None:
    """Write ``path`` (a ``.idx``) for sequences of these lengths stored back to back."""
    lengths = np.asarray(sequence_lengths, dtype=np.int32)
    pointers = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths) > 1:
        np.cumsum(lengths[:-1].astype(np.int64) * dtype.itemsize, out=pointers[1:])
    with open(path, "wb") as f:
        f.write(HEADER)
        f.write(struct.pack("<Q", VERSION))
        f.write(struct.pack("<B", DTYPE_CODES[np.dtype(dtype)]))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(document_indices)))
        f.write(lengths.tobytes(order="C"))
        f.write(pointers.tobytes(order="C"))
        f.write(np.asarray(document_indices, dtype=np.int64).tobytes(order="C"))


def read_index(path: str) -> tuple[np.dtype[Any], np.ndarray, np.ndarray]:
    """The dtype, sequence lengths and document indices of a Megatron ``.idx`` file.

    Args:
        path: The ``.idx`` file.

    Raises:
        CacheError: The file is not a Megatron index (the error names it).
    """
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(HEADER) or len(data) < len(HEADER) + 25:
        raise CacheError(f"{path}: not a Megatron index (no MMIDIDX header)")
    offset = len(HEADER)
    (version,) = struct.unpack_from("<Q", data, offset)
    (code,) = struct.unpack_from("<B", data, offset + 8)
    sequences, documents = struct.unpack_from("<QQ", data, offset + 9)
    dtypes = {code: dtype for dtype, code in DTYPE_CODES.items()}
    if version != VERSION or code not in dtypes:
        raise CacheError(f"{path}: Megatron index version {version}, dtype code {code}: not one beamtok writes")
    start = offset + 25
    lengths = np.frombuffer(data, dtype=np.int32, count=sequences, offset=start)
    indices = np.frombuffer(data, dtype=np.int64, count=documents, offset=start + 12 * sequences)
    return dtypes[code], lengths.copy(), indices.copy()


class MegatronPart:
    """One shard's documents as a ``.bin``/``.idx`` pair: each document one sequence."""

    def __init__(self, prefix: str, dtype: np.dtype[Any]) -> None:
        self.prefix = prefix
        self.dtype = np.dtype(dtype)
        self.lengths: list[int] = []
        self._bin: BinaryIO = open(prefix + ".bin", "wb")

    def add_document(self, ids: np.ndarray) -> None:
        """Append a document's token ids (CacheError where an id does not fit the dtype)."""
        if len(ids) and self.dtype == np.uint16 and (int(ids.max()) >= 65_536 or int(ids.min()) < 0):
            raise CacheError(f"{self.prefix}: a token id of {int(ids.max())} does not fit uint16 ids")
        self._bin.write(np.asarray(ids, dtype=self.dtype).tobytes(order="C"))
        self.lengths.append(len(ids))

    def finish(self) -> int:
        """Close the ``.bin`` and write the ``.idx``; the number of documents."""
        self._bin.close()
        write_index(self.prefix + ".idx", self.dtype, np.array(self.lengths), np.arange(len(self.lengths) + 1))
        return len(self.lengths)


def merge_parts(parts: Sequence[str], prefix: str) -> tuple[int, int]:
    """Join the parts (prefixes, in order) into ``prefix.bin``/``prefix.idx``, the same files
    one builder fed every document in that order writes; (documents, tokens)."""
    lengths: list[np.ndarray] = []
    dtype: np.dtype[Any] | None = None
    with open(prefix + ".bin.tmp", "wb") as out:
        for part in parts:
            part_dtype, part_lengths, _ = read_index(part + ".idx")
            if dtype is not None and part_dtype != dtype:
                raise CacheError(f"{part}: ids stored as {part_dtype}, the other parts as {dtype}")
            dtype = part_dtype
            lengths.append(part_lengths)
            with open(part + ".bin", "rb") as f:
                shutil.copyfileobj(f, out, 16 << 20)
    joined = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int32)
    write_index(prefix + ".idx.tmp", dtype or np.dtype(np.uint16), joined, np.arange(len(joined) + 1))
    os.replace(prefix + ".bin.tmp", prefix + ".bin")
    os.replace(prefix + ".idx.tmp", prefix + ".idx")
    return len(joined), int(joined.sum())

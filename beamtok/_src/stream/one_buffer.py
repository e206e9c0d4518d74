"""A batch that crosses from a DataLoader worker to the training process in one piece.

A torch DataLoader worker sends each tensor of a batch through a shared-memory segment of its
own, passed as a file descriptor, and passing descriptors is what a loader with workers spent
most of its time on (benchmarks/read_vs_litdata.py). :class:`OneBufferBatch` is the same dict
of tensors, pickled as one byte string and a layout: the worker packs its fields into one
buffer (a small copy), which goes through the loader's pipe with the rest of the message, and
the training process gets views of it (one shared-memory segment instead of eight would still
pass a descriptor). Fields that are not arrays travel as they are.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from beamtok._src.stream.stages.collate import Batched

__all__ = ["OneBufferBatch", "in_one_buffer"]

ALIGN = 8  # every field starts at a multiple of the widest dtype's size, so views need no copy


class OneBufferBatch(Batched):
    """A batch (a dict of tensors and plain values) that pickles as one buffer; unpickled,
    its tensors are views of that buffer."""

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        layout: list[tuple[str, Any]] = []
        tensors: list[tuple[int, torch.Tensor]] = []
        size = 0
        for key, value in self.items():
            if isinstance(value, np.ndarray) and value.dtype != object:
                value = torch.from_numpy(np.ascontiguousarray(value))
            if isinstance(value, torch.Tensor) and not value.is_cuda:
                flat = value.detach().contiguous().reshape(-1)
                nbytes = flat.numel() * flat.element_size()
                layout.append((key, ("tensor", size, nbytes, flat.dtype, tuple(value.shape))))
                tensors.append((size, flat))
                size += -(-nbytes // ALIGN) * ALIGN
            else:
                layout.append((key, ("value", value)))
        buffer = bytearray(size)
        target = torch.frombuffer(buffer, dtype=torch.uint8) if size else torch.empty(0, dtype=torch.uint8)
        for offset, flat in tensors:
            if flat.numel():
                target[offset : offset + flat.numel() * flat.element_size()] = flat.view(torch.uint8)
        return (_unpacked, (buffer, layout))

    def __copy__(self) -> OneBufferBatch:
        return OneBufferBatch(self)


def _unpacked(data: bytearray, layout: list[tuple[str, Any]]) -> OneBufferBatch:
    buffer = torch.frombuffer(data, dtype=torch.uint8) if len(data) else torch.empty(0, dtype=torch.uint8)
    out = OneBufferBatch()
    for key, spec in layout:
        if spec[0] == "value":
            out[key] = spec[1]
            continue
        _, offset, nbytes, dtype, shape = spec
        out[key] = buffer[offset : offset + nbytes].view(dtype).reshape(shape)
    return out


def in_one_buffer(item: Any) -> Any:
    """``item`` with its batch (a dict, or the dict of an ``enumerate()`` pair) as a
    :class:`OneBufferBatch`; anything else as it is."""
    if isinstance(item, dict):
        return OneBufferBatch(item)
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], dict):
        return item[0], OneBufferBatch(item[1])
    return item

"""What any on-the-fly pipeline over JSON lines spends outside its engine, at the least.

The fast path's pipeline (files -> tokenize -> ensure_bos_eos -> concat_chunk -> batch) is
measured against its engine alone on texts already parsed (``fast_path.py``'s paired
measure). Whatever the pipeline is made of, it must also read and parse the files and write
each batch. This module times those two parts alone, so the paired measure can report the
highest share of its engine a pipeline could keep on this machine:

- ``parse_seconds``: the files read and every line's text parsed with ``orjson`` (the
  parser the reader uses, the fastest on PyPI), nothing else: no line numbers, no checks;
- ``BatchFloor``: every batch of ``batch_size`` rows of ``seq_len`` tokens written in one
  compiled pass into four fresh arrays (input ids, segment ids and positions as int32, the
  loss mask as int8), from the ids already joined into one stream with BOS and EOS (that
  join is done before the timing: a floor, not a model of the pipeline). Needs numba.

ceiling = engine / (engine + parse + batch floor), per pass; no pipeline can beat it, for it
leaves out cutting rows, cursors, counts, the per-document steps and the iterator.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from beamtok._src.transforms.bos_eos import ensure_bos_eos


def parse_seconds(paths: Sequence[str]) -> float:
    """Seconds to read ``paths`` and parse each line's ``text``."""
    start = time.perf_counter()
    for path in paths:
        with open(path, "rb") as f:
            for line in f:
                orjson.loads(line)["text"]
    return time.perf_counter() - start


def _fill_kernel():  # type: ignore[no-untyped-def]
    import numba

    @numba.njit(cache=False)
    def fill(stream, starts, at, ids, segments, positions, mask):  # type: ignore[no-untyped-def]
        rows, width = ids.shape
        for r in range(rows):
            segment, position = 1, 0
            base = at + r * width
            for c in range(width):
                j = base + c
                if c and starts[j]:  # a document starts inside the row
                    segment += 1
                    position = 0
                ids[r, c] = stream[j]
                segments[r, c] = segment
                positions[r, c] = position
                mask[r, c] = 1
                position += 1

    return fill


class BatchFloor:
    """The batches of ``documents`` (each one's ids), with BOS and EOS where ``ensure_bos_eos``
    puts them, written by one compiled pass a batch; ``seconds()`` times writing them all."""

    def __init__(
        self,
        documents: Sequence[np.ndarray],
        bos: int | None,
        eos: int | None,
        seq_len: int = 1024,
        batch_size: int = 8,
    ) -> None:
        parts = [ensure_bos_eos(np.asarray(ids, dtype=np.int32), bos, eos) for ids in documents]
        lengths = [len(ids) for ids in parts]
        self.stream = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        self.starts = np.zeros(len(self.stream), dtype=np.bool_)
        self.starts[np.cumsum([0, *lengths[:-1]], dtype=np.int64)] = True
        self.shape = (batch_size, seq_len)
        self._fill = _fill_kernel()
        self._write(1)  # compiled before any timing

    def _write(self, limit: int | None = None) -> None:
        step = self.shape[0] * self.shape[1]
        batches = len(self.stream) // step if limit is None else min(limit, len(self.stream) // step)
        for b in range(batches):
            self._fill(
                self.stream,
                self.starts,
                b * step,
                np.empty(self.shape, dtype=np.int32),
                np.empty(self.shape, dtype=np.int32),
                np.empty(self.shape, dtype=np.int32),
                np.empty(self.shape, dtype=np.int8),
            )

    def seconds(self) -> float:
        """Seconds to write every whole batch of the stream."""
        start = time.perf_counter()
        self._write()
        return time.perf_counter() - start


def ceilings(engine_s: list[float], parse_s: list[float], floor_s: list[float], tokens: int) -> dict[str, Any]:
    """The highest share of its engine any pipeline could keep in these passes: the engine's
    time over itself plus parsing the files alone and writing the batches alone
    (``parse_seconds``, ``BatchFloor``); with the parsing alone where numba is missing. A bound only while
    the engine costs inside the pipeline what it costs alone (an engine faster on the
    pipeline's smaller calls can put the pipeline above it)."""
    found: dict[str, Any] = {
        "parse_ns_per_token": statistics.median(1e9 * s / tokens for s in parse_s),
        "ceiling_parse_only": statistics.median(e / (e + p) for e, p in zip(engine_s, parse_s)),
    }
    if floor_s:
        found["batch_floor_ns_per_token"] = statistics.median(1e9 * s / tokens for s in floor_s)
        found["ceiling"] = statistics.median(e / (e + p + f) for e, p, f in zip(engine_s, parse_s, floor_s))
    return found

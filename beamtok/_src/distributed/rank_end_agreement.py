"""Ranks that end together: ``DistributedLoader(even=...)`` agrees, at every step, whether
any rank's data has ended.

Data-parallel ranks meet in every step's all-reduce; a rank whose share ends first would leave
the others waiting there for ever. Counting each rank's share before reading works only where
the counts are known (a cache's row counts) and stops working when a resume on another world
size deals the rest out anew. So the loader asks instead: before handing out a batch, every
rank says whether it has one (one all-reduce of a single integer over the loader's group):

- ``"drop"``: when any rank has none, every rank stops; the batches the others still had are
  not read (the one each read for that step included). The loader warns once, on each rank
  that leaves a batch, that it did.
- ``"pad"``: while any rank has one, a rank without gets a padding batch shaped like its
  last one: ``input_ids`` the pad id, ``labels`` -100, every other number 0 (no loss, no
  attention), provenance (``shard``, ``index``, ``doc``) -1; every rank stops when none has one.

The positions saved are each reader's own, so a checkpoint resumes on any world size as a
stream without ``even`` does; nothing about the evening is saved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["LOADER_EVEN_MODES", "evened", "padding_like"]

LOADER_EVEN_MODES = ("drop", "pad")
PROVENANCE = ("shard", "index", "doc", "source")
FILL = {"labels": -100}


def padding_like(item: Any, pad_id: int) -> Any:
    """A batch (or example) shaped like ``item`` that trains on nothing: ``input_ids`` the pad
    id, ``labels`` -100, provenance -1, every other array 0; values that are not arrays kept."""
    import torch

    if not isinstance(item, dict):
        raise TypeError(f"even='pad' pads batches that are dicts of arrays, got {type(item).__name__}")
    out: dict[str, Any] = {}
    for key, value in item.items():
        fill = pad_id if key == "input_ids" else -1 if key in PROVENANCE else FILL.get(key, 0)
        if isinstance(value, torch.Tensor):
            out[key] = torch.full_like(value, fill)
        elif isinstance(value, np.ndarray):
            out[key] = np.full_like(value, fill)
        else:
            out[key] = value
    return out


def evened(
    batches: Iterator[Any],
    mode: str,
    agree: Callable[[int, bool], int],
    pad_id: int,
    template: Callable[[], Any],
    where: str,
) -> Iterator[Any]:
    """``batches`` ended on every rank at once (``mode`` drop or pad). ``agree(flag, any)``
    reduces this rank's 0/1 over the group (the max where ``any``, else the min);
    ``template()`` gives a batch to shape padding after when this rank has read none."""
    last: Any = None
    step = 0
    while True:
        batch = next(batches, None)
        have = batch is not None
        if mode == "drop":
            if not agree(int(have), False):
                if have:
                    log.warning(
                        "%s: another rank's data ended at step %d; this rank's remaining batches are not read (even='drop')",
                        where,
                        step,
                    )
                return
        elif not agree(int(have), True):
            return
        if have:
            last = batch
            yield batch
        else:
            if last is None:
                last = template()
            yield padding_like(last, pad_id)
        step += 1

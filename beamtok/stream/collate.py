"""Collate examples into a batch: numpy arrays, or torch tensors on request."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Batched", "collate", "to_tensors"]

PAD_VALUES = {"input_ids": None, "labels": -100}  # None: the tokenizer's pad id


class Batched(dict):
    """A batch made by ``Dataset.batch()``: a plain dict of stacked fields, marked so that a
    torch DataLoader that would batch it again can tell (see ``beamtok.stream.torch_dataset``).
    ``counted``: the real and pad tokens its ``segment_ids`` hold, where its maker knew them
    (the iterator's tally then need not count them again)."""

    counted: tuple[int, int] | None = None


def collate(examples: list[dict[str, Any]], pad_id: int, tensors: str = "numpy") -> dict[str, Any]:
    """Stack each field; ragged token fields are right-padded to the longest example.

    Padding uses ``pad_id`` for ``input_ids``, -100 for ``labels`` and 0 elsewhere (so
    ``segment_ids`` and ``loss_mask`` mark padding as such). Strings are kept as lists.
    """
    batch: dict[str, Any] = {}
    for key in examples[0]:
        values = [ex[key] for ex in examples]
        first = values[0]
        if isinstance(first, np.ndarray):
            batch[key] = _stack(values, PAD_VALUES.get(key, 0) if key != "input_ids" else pad_id)
        elif isinstance(first, (int, np.integer)) and not isinstance(first, bool):
            batch[key] = np.asarray(values, dtype=np.int64)
        else:
            batch[key] = values
    return to_tensors(batch) if tensors == "torch" else batch


def to_tensors(batch: dict[str, Any]) -> dict[str, Any]:
    """The batch's numpy arrays as torch tensors (sharing their memory)."""
    import torch

    return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in batch.items()}


def _stack(arrays: list[np.ndarray], pad: Any) -> np.ndarray:
    lengths = [len(a) for a in arrays]
    longest = max(lengths)
    if min(lengths) == longest:
        if arrays[0].ndim == 1:  # one concatenation costs a third of np.stack (shapes that differ fail either way)
            return np.concatenate(arrays).reshape(len(arrays), longest)
        return np.stack(arrays)
    out = np.full((len(arrays), longest), pad, dtype=arrays[0].dtype)
    for row, a in zip(out, arrays):
        row[: len(a)] = a
    return out

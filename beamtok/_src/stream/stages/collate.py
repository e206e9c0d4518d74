"""Collate examples into a batch: numpy arrays, or torch tensors on request."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["PAD_POSITIONS", "Batched", "collate", "packed_conventions", "to_tensors"]

PAD_VALUES = {"input_ids": None, "labels": -100}  # None: the tokenizer's pad id
PAD_POSITIONS = ("zero", "continue")
IGNORE_INDEX = -100


class Batched(dict):
    """A batch made by ``Dataset.batch()``: a plain dict of stacked fields, marked so that a
    torch DataLoader that would batch it again can tell (see ``beamtok._src.stream.torch_dataset``).
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


def packed_conventions(
    batch: dict[str, Any], *, mask_starts: bool = False, pad_positions: str = "zero"
) -> dict[str, Any]:
    """A numpy batch of packed rows in the conventions other trainers' collators use.

    ``mask_starts``: no loss on the first token of each piece (``loss_mask`` 0, ``labels``
    -100), as TRL's padding-free collator and ``transformers``' ``DataCollatorWithFlattening``
    mask each sequence's first label: with labels shifted inside the model, that token would
    otherwise be predicted from the piece before it. ``pad_positions="continue"``: padding's
    ``position_ids`` go on counting from the row's last real token (0, 1, 2... on a row of
    padding alone) instead of being 0, so code that finds sequence starts where
    ``position_ids == 0`` (flash-attention varlen from position ids, padding-free flattening)
    finds exactly the pieces, the padding joined to the last one. Fields a batch lacks are left
    out; the batch given is not changed."""
    out = dict(batch)
    segments = batch.get("segment_ids")
    if segments is None or segments.ndim != 2:
        return out
    real = segments > 0
    if mask_starts:
        starts = real.copy()
        starts[:, 1:] &= segments[:, 1:] != segments[:, :-1]
        if "loss_mask" in batch:
            mask = batch["loss_mask"].copy()
            mask[starts] = 0
            out["loss_mask"] = mask
        if "labels" in batch:
            labels = batch["labels"].copy()
            labels[starts] = IGNORE_INDEX
            out["labels"] = labels
    if pad_positions == "continue" and "position_ids" in batch and not real.all():
        positions = batch["position_ids"].copy()
        for row in np.flatnonzero(~real.all(axis=1)):
            pads = np.flatnonzero(~real[row])
            last = int(pads[0]) - 1  # padding follows the row's real tokens
            begin = int(positions[row, last]) + 1 if last >= 0 else 0
            positions[row, pads] = np.arange(begin, begin + len(pads), dtype=positions.dtype)
        out["position_ids"] = positions
    return out


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

"""BOS/EOS policy: add only the special tokens a document lacks."""

from __future__ import annotations

import numpy as np

__all__ = ["ensure_bos_eos"]


def ensure_bos_eos(ids: np.ndarray, bos_id: int | None, eos_id: int | None) -> np.ndarray:
    """Return ``ids`` starting with ``bos_id`` and ending with ``eos_id`` (None: leave that end).

    Where BOS equals EOS (GPT-2), a lone special token counts as the BOS, so a one-token
    document still gets its EOS.

    Args:
        ids: A document's token ids.
        bos_id: The BOS id, or None to leave the start.
        eos_id: The EOS id, or None to leave the end.
    Returns:
        The ids with both ends in place (``ids`` itself when nothing is added).
    """
    n = len(ids)
    has_bos = bos_id is None or (n > 0 and ids[0] == bos_id)
    has_eos = eos_id is None or (n > 0 and ids[-1] == eos_id and (n > 1 or bos_id != eos_id))
    if has_bos and has_eos:
        return ids
    start = 0 if has_bos else 1
    out = np.empty(n + start + (not has_eos), dtype=ids.dtype)
    if start:
        out[0] = bos_id
    out[start : start + n] = ids
    if not has_eos:
        out[-1] = eos_id
    return out

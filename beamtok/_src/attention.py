"""Attention inputs for packed rows, so the examples packed into one row do not see each other.

A packed row holds several documents or SFT examples, told apart by ``segment_ids`` (1, 2, ...
per piece, 0 on padding) with ``position_ids`` restarting at 0 for each piece. A model given
only the row and a padding mask attends across the pieces and, through the label shift,
predicts the first token of each piece from the end of the previous one. These helpers turn a
batch of packed rows into what training code passes instead, for three attention paths:

- :func:`packed_attention_mask`: a block-diagonal causal mask ``[batch, 1, L, L]`` for
  PyTorch's ``scaled_dot_product_attention`` and for Hugging Face models, which take a 4-D
  mask as given (boolean for ``sdpa``; an additive float mask for ``eager``);
- :func:`varlen_seqlens`: ``cu_seqlens``/``max_seqlen`` and the indices of the real tokens,
  for variable-length flash attention over the unpadded tokens;
- :func:`flatten_packed`: the Hugging Face flattening convention (``DataCollatorWithFlattening``):
  one row ``[1, tokens]`` without padding, ``position_ids`` restarting per piece, the first
  label of each piece set to -100, and the flash-attention keyword arguments.

:func:`packed_labels` gives labels for the first two paths: -100 on padding, on tokens out of
the loss, and on the first token of each piece. With these, the loss of a packed row equals
the sum of the losses of its pieces run one by one. Inputs may be numpy arrays or tensors;
outputs are tensors. Requires torch (the ``torch`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

try:
    import torch
except ImportError:
    raise ModuleNotFoundError("beamtok._src.attention needs PyTorch: pip install 'beamtok[torch]'") from None

__all__ = ["IGNORE_INDEX", "VarlenSeqs", "flatten_packed", "packed_attention_mask", "packed_labels", "varlen_seqlens"]

IGNORE_INDEX = -100


def _rows(value: Any, name: str) -> torch.Tensor:
    tensor = torch.as_tensor(value)
    if tensor.dim() == 1:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() != 2:
        raise ValueError(f"{name} must be [batch, seq_len] (or one row), got shape {tuple(tensor.shape)}")
    return tensor


def packed_attention_mask(segment_ids: Any, *, dtype: torch.dtype = torch.bool) -> torch.Tensor:
    """The block-diagonal causal mask ``[batch, 1, L, L]`` of packed rows.

    Query ``i`` sees key ``j`` when both are in the same piece and ``j <= i``. A padding
    token sees only itself, so no row of the mask is empty (an empty row makes softmax NaN);
    its outputs carry no loss. ``dtype=torch.bool`` gives True where attention is allowed
    (``scaled_dot_product_attention``, Hugging Face ``sdpa``); a float dtype gives an additive
    mask, 0 where allowed and the dtype's lowest value elsewhere (Hugging Face ``eager``).

    Args:
        segment_ids: ``[batch, L]`` segment ids (0: padding).
        dtype: ``torch.bool``, or a float dtype for an additive mask.
    Returns:
        The mask, ``[batch, 1, L, L]``.
    """
    segments = _rows(segment_ids, "segment_ids")
    length = segments.shape[1]
    same = segments.unsqueeze(2) == segments.unsqueeze(1)
    causal = torch.ones(length, length, dtype=torch.bool, device=segments.device).tril()
    real = (segments > 0).unsqueeze(2)
    diagonal = torch.eye(length, dtype=torch.bool, device=segments.device)
    allowed = ((same & causal & real) | diagonal).unsqueeze(1)
    if dtype == torch.bool:
        return allowed
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be torch.bool or a float dtype, got {dtype}")
    mask = torch.zeros(allowed.shape, dtype=dtype, device=segments.device)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)


def packed_labels(batch: Mapping[str, Any]) -> torch.Tensor:
    """Labels ``[batch, L]`` for a packed batch, in the unshifted Hugging Face convention.

    From ``labels`` when the batch has them (SFT and chat data), else from ``input_ids`` and
    ``loss_mask``; -100 on padding and on the first token of each piece, so no piece is
    trained to continue the one before it.

    Args:
        batch: A packed batch: ``segment_ids`` and ``labels``, or ``input_ids`` and ``loss_mask``.
    Returns:
        The labels, ``[batch, L]``.
    """
    segments = _rows(batch["segment_ids"], "segment_ids")
    if "labels" in batch:
        labels = _rows(batch["labels"], "labels").long().clone()
    else:
        labels = _rows(batch["input_ids"], "input_ids").long().clone()
        if "loss_mask" in batch:
            labels[_rows(batch["loss_mask"], "loss_mask") == 0] = IGNORE_INDEX
    labels[_piece_starts(segments) | (segments == 0)] = IGNORE_INDEX
    return labels


def _piece_starts(segments: torch.Tensor) -> torch.Tensor:
    """True on the first token of each piece."""
    starts = torch.ones_like(segments, dtype=torch.bool)
    starts[:, 1:] = segments[:, 1:] != segments[:, :-1]
    return starts & (segments > 0)


@dataclass(frozen=True)
class VarlenSeqs:
    """The pieces of a packed batch as variable-length sequences over its real tokens.

    ``indices`` selects the real tokens from the batch flattened to ``[batch * L]`` (gather
    q, k and v with it); ``cu_seqlens`` (int32, ``pieces + 1``) are the pieces' boundaries in
    that selection; ``max_seqlen`` is the longest piece.

    Attributes:
        indices: The real tokens' indices in the flattened batch.
        cu_seqlens: The pieces' boundaries (int32, pieces + 1).
        max_seqlen: The longest piece.
    """

    indices: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seqlen: int


def varlen_seqlens(segment_ids: Any) -> VarlenSeqs:
    """``cu_seqlens``/``max_seqlen`` for ``flash_attn_varlen_func`` from ``segment_ids``.

    Args:
        segment_ids: ``[batch, L]`` segment ids (0: padding).
    Returns:
        The pieces as variable-length sequences (:class:`VarlenSeqs`).
    """
    segments = _rows(segment_ids, "segment_ids")
    flat = segments.reshape(-1)
    indices = torch.nonzero(flat > 0).reshape(-1)
    starts = _piece_starts(segments).reshape(-1)[indices]
    boundaries = torch.nonzero(starts).reshape(-1)
    total = torch.tensor([len(indices)], device=segments.device)
    cu_seqlens = torch.cat([boundaries, total]).to(torch.int32)
    max_seqlen = int(cu_seqlens.diff().max()) if len(boundaries) else 0
    return VarlenSeqs(indices, cu_seqlens, max_seqlen)


def flatten_packed(batch: Mapping[str, Any]) -> dict[str, Any]:
    """A packed batch as one row in the Hugging Face flattening convention.

    Returns ``input_ids``, ``labels`` and ``position_ids`` of shape ``[1, tokens]`` (padding
    dropped, positions restarting per piece, the first label of each piece -100) and
    ``cu_seq_lens_q``/``cu_seq_lens_k``/``max_length_q``/``max_length_k``: pass them all to a
    model that uses ``flash_attention_2`` (or any attention that reads packed sequences from
    these arguments), as with ``DataCollatorWithFlattening(return_flash_attn_kwargs=True)``.

    Args:
        batch: A packed batch.
    Returns:
        The batch as one flattened row.
    """
    seqs = varlen_seqlens(batch["segment_ids"])
    segments = _rows(batch["segment_ids"], "segment_ids")
    starts = seqs.cu_seqlens[:-1].long()
    lengths = seqs.cu_seqlens.diff().long()
    positions = torch.arange(len(seqs.indices), device=segments.device) - torch.repeat_interleave(starts, lengths)
    take = seqs.indices
    return {
        "input_ids": _rows(batch["input_ids"], "input_ids").long().reshape(-1)[take].unsqueeze(0),
        "labels": packed_labels(batch).reshape(-1)[take].unsqueeze(0),
        "position_ids": positions.unsqueeze(0),
        "cu_seq_lens_q": seqs.cu_seqlens,
        "cu_seq_lens_k": seqs.cu_seqlens,
        "max_length_q": seqs.max_seqlen,
        "max_length_k": seqs.max_seqlen,
    }

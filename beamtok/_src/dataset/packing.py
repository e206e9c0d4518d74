"""The packings: how tokenized documents become rows (concatenated and cut, padded one a row,
whole examples or documents packed, power-of-two pieces, sliding windows). A dataset has one."""

from __future__ import annotations

import warnings

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.validate import check_choice
from beamtok._src.dataset.stage_adding import D, root_for_steps, tokenizer_ref, with_pack
from beamtok._src.transforms.packing_modes import BestFit, ConcatChunk, FirstFit, Greedy, Pad, PowerOfTwo, Window

__all__ = ["concat_chunk", "pack_documents", "pack_examples", "pack_power_of_two", "pad", "sliding_window"]


def concat_chunk(self: D, seq_len: int, *, remainder: str = "pad") -> D:
    """Concatenate documents and cut rows of ``seq_len`` tokens, with segment/position ids.

    ``remainder`` says what happens to a shard's last partial row: ``pad`` it, ``drop`` it
    (its tokens are counted as dropped) or ``keep`` it shorter.

    Args:
        seq_len: The tokens of each row.
        remainder: ``"pad"``, ``"drop"`` or ``"keep"``: what becomes of a shard's last partial row.
    Returns:
        A new Dataset packed this way (a dataset has one packing).
    """
    return with_pack(self, ConcatChunk, seq_len, remainder=remainder)


def pad(self: D, seq_len: int) -> D:
    """One document (or SFT example) a row, truncated (counted) and padded to ``seq_len``.

    Args:
        seq_len: The tokens of each row: longer documents are truncated, shorter ones padded.
    Returns:
        A new Dataset packed this way (a dataset has one packing).
    """
    return with_pack(self, Pad, seq_len)


def pack_examples(self: D, seq_len: int, *, method: str = "greedy", window: int = 64) -> D:
    """Pack whole examples into padded rows of ``seq_len``, never splitting one.

    ``greedy`` fills rows in order; ``first_fit`` packs each window of ``window`` examples
    first-fit-decreasing, wasting less padding. Segment and position ids restart per
    example; examples longer than ``seq_len`` are skipped and counted as ``too_long``
    (set ``max_length`` on tokenize_sft/tokenize_chat to truncate them instead). The same
    holds when packing an unpacked cache at read time.

    Args:
        seq_len: The tokens of each row.
        method: ``"greedy"`` (in order) or ``"first_fit"`` (first-fit decreasing over a window).
        window: The examples ``first_fit`` packs at a time.
    Returns:
        A new Dataset packed this way (a dataset has one packing).
    """
    check_choice(method, "method", ("greedy", "first_fit"))
    mode = FirstFit if method == "first_fit" else Greedy
    if not any(step.SUPERVISED for step in root_for_steps(self, mode.API).spec.steps):
        warnings.warn(
            "pack_examples() packs whole examples and skips every document longer than seq_len (counted as "
            "too_long); pretraining documents are mostly longer: concat_chunk(seq_len) packs them without loss",
            UserWarning,
            stacklevel=2,
        )
    return with_pack(self, mode, seq_len, window=window if mode is FirstFit else None)


def pack_documents(
    self: D,
    seq_len: int,
    *,
    method: str = "best_fit",
    window: int = 256,
    long_docs: str = "split",
    bos: bool = False,
) -> D:
    """Pack whole documents into padded rows of ``seq_len``, best-fit decreasing over
    windows of ``window`` documents: fewer documents cut across rows than ``concat_chunk``,
    for some padding (``stats()["padding_waste"]``).

    A document longer than ``seq_len`` is split into ``seq_len`` pieces, each packed as a
    document of its own (``long_docs="split"``), or keeps its first ``seq_len`` tokens
    (``"truncate"``; the rest count as ``truncated_tokens``). ``bos=True`` starts every
    row with the tokenizer's BOS token: pieces that lack it get it prepended. A larger
    window wastes less padding and re-reads more documents when a resume lands in it.

    Args:
        seq_len: The tokens of each row.
        method: ``"best_fit"``, the one method (best-fit decreasing over a window).
        window: The documents packed at a time.
        long_docs: ``"split"`` a longer document into pieces, or ``"truncate"`` it.
        bos: Start every row with the tokenizer's BOS token.
    Returns:
        A new Dataset packed this way (a dataset has one packing).
    """
    check_choice(method, "method", ("best_fit",))
    check_choice(long_docs, "long_docs", ("split", "truncate"))
    bos_id = None
    if bos:
        ref = tokenizer_ref(self, BestFit.API)
        if ref.bos_id is None:
            raise ConfigError(f"tokenizer {ref.name!r} has no BOS token; call pack_documents(bos=False)")
        bos_id = ref.bos_id
    return with_pack(self, BestFit, seq_len, window=window, long_docs=long_docs, bos_id=bos_id)


def pack_power_of_two(self: D, max_len: int, *, min_len: int = 64) -> D:
    """Cut each document into unpadded rows of power-of-two lengths: ``max_len`` rows
    while the document lasts, then the binary form of the rest down to ``min_len`` (fewer
    tokens left over count as ``truncated_tokens``). No row crosses a document; batch them
    with ``batch_tokens(max_tokens)`` for variable sequence length training.

    Args:
        max_len: The longest row (a power of two).
        min_len: The shortest row (a power of two); shorter leftovers are counted as truncated.
    Returns:
        A new Dataset packed this way (a dataset has one packing).
    """
    return with_pack(self, PowerOfTwo, max_len, window=min_len)


def sliding_window(self: D, seq_len: int, *, stride: int | None = None) -> D:
    """Windows of ``seq_len`` tokens every ``stride`` tokens (default: no overlap).

    Overlapped tokens are masked out of the loss in every window but a document's first.

    Args:
        seq_len: The tokens of each window.
        stride: Tokens between window starts; None: ``seq_len`` (no overlap).
    Returns:
        A new Dataset packed this way (a dataset has one packing).
    """
    return with_pack(self, Window, seq_len, stride=stride if stride is not None else seq_len)

"""Rendered conversations to token ids and loss masks: each conversation tokenized whole, a
token trained where its characters meet a trained span (``transformers``' rule,
:func:`~beamtok._src.transforms.chat_spans.mask_from_spans`).

Two ways to the same mask. Where the spans' edges are token edges, the pieces between them
tokenized apart give the very ids of the whole, and each piece's tokens take its mark: the
fast path encodes all of it and no offsets are needed. Where a template's edges merge into
tokens (a header's newline and the text after it, under a pre-tokenizer that joins them), the
whole text is tokenized once by ``tokenizers`` with offsets; which way a template goes is
learnt on its first block of conversations and kept. A byte-level vocabulary needs neither:
each token's characters follow from its bytes, so the fast path's ids give the offsets.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from beamtok._src.transforms.chat_spans import mask_from_spans
from beamtok._src.transforms.tokenize import Tokenizer

__all__ = ["ChatTokenizer", "byte_lengths", "cut_at_spans", "offsets_from_bytes"]

Spans = list[tuple[int, int]]
_UNKNOWN = object()
# byte_lengths() by tokenizer fingerprint: a process reads each tokenizer's vocabulary once,
# however many chat steps and shard processors use it
_BYTE_LENGTHS: dict[str, np.ndarray | None] = {}


class ChatTokenizer:
    """A tokenizer's way from rendered conversations to ids and loss masks (see the module
    docstring); made once a process for each chat step."""

    def __init__(self, tok: Tokenizer) -> None:
        """Read the tokenizer once.

        Args:
            tok: The tokenizer.
        """
        self.tok = tok
        self.byte_lengths = byte_lengths(tok)
        self.pieces_align: bool | None = None  # whether spans' edges were mostly token edges (None: not tried)

    def __call__(self, chats: Sequence[tuple[str, Spans]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each rendered conversation's ids and loss mask.

        Args:
            chats: ``(text, trained spans)`` of each conversation.
        Returns:
            ``(ids, mask)`` for each conversation, int32 and int8.
        """
        if not chats:
            return []
        tok = self.tok
        if self.pieces_align is False and self.byte_lengths is None:
            return [_with_offsets(tok, text, spans) for text, spans in chats]
        wholes = [
            np.asarray(w, np.int32) for w in tok.encode_batch([text for text, _ in chats], add_special_tokens=False)
        ]
        if self.byte_lengths is not None:
            return [
                (ids, _from_bytes(tok, self.byte_lengths, text, spans, ids))
                for (text, spans), ids in zip(chats, wholes)
            ]
        cuts = [cut_at_spans(text, spans) for text, spans in chats]
        pieces = iter(tok.encode_batch([piece for cut in cuts for piece, _ in cut], add_special_tokens=False))
        out = []
        aligned = 0
        for (text, spans), cut, whole in zip(chats, cuts, wholes):
            mask = _from_pieces(cut, [next(pieces) for _ in cut], whole)
            if mask is None:
                out.append(_with_offsets(tok, text, spans, whole))
            else:
                aligned += 1
                out.append((whole, mask))
        self.pieces_align = aligned * 2 >= len(chats)
        return out


def byte_lengths(tok: Tokenizer) -> np.ndarray | None:
    """Each token's length in bytes, where a token's characters are exactly its text's bytes
    and ``tokenizers``' offsets are their characters: a byte-level vocabulary with no
    normalizer and no offset trimming after it. None for any other tokenizer.

    Args:
        tok: The tokenizer.
    """
    known = _BYTE_LENGTHS.get(tok.fingerprint, _UNKNOWN)
    if known is not _UNKNOWN:
        return known  # type: ignore[return-value]
    parts = {name: _component(tok, name) for name in ("normalizer", "pre_tokenizer", "decoder", "post_processor")}
    steps = json.dumps([parts["pre_tokenizer"], parts["decoder"]])
    if parts["normalizer"] is not None or '"ByteLevel"' not in steps or _trims_offsets(parts["post_processor"]):
        _BYTE_LENGTHS[tok.fingerprint] = None
        return None
    lengths = np.zeros(tok.vocab_size, np.int64)
    for token, index in tok.backend.get_vocab(with_added_tokens=False).items():
        if index < len(lengths):
            lengths[index] = len(token)  # a byte-level token's characters stand for one byte each
    for index, added in tok.backend.get_added_tokens_decoder().items():
        if index < len(lengths):
            lengths[index] = len(added.content.encode("utf-8"))
    _BYTE_LENGTHS[tok.fingerprint] = lengths
    return lengths


def _component(tok: Tokenizer, name: str) -> Any:
    """One part of the tokenizer's pipeline as JSON (None where it has none), read alone."""
    part = getattr(tok.backend, name, None)
    return None if part is None else json.loads(part.__getstate__())


def _trims_offsets(processor: Any) -> bool:
    if not isinstance(processor, dict):
        return False
    if processor.get("type") == "Sequence":
        return any(_trims_offsets(p) for p in processor.get("processors", []))
    return (
        processor.get("type") in ("ByteLevel", "RobertaProcessing") and processor.get("trim_offsets", True) is not False
    )


def offsets_from_bytes(lengths: np.ndarray, text: str, ids: np.ndarray) -> np.ndarray | None:
    """Each token's ``(start, end)`` characters, found from its bytes: the character of its
    first byte to the character of its last byte (a token holding part of a character spans it
    all, as ``tokenizers`` reports it). None where the tokens' bytes are not the text's.

    Args:
        lengths: Each token's length in bytes (:func:`byte_lengths`).
        text: The text.
        ids: Its tokens.
    """
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    sizes = lengths[ids]
    ends = np.cumsum(sizes)
    if not len(ids) or ends[-1] != len(data) or not np.all(sizes > 0):
        return None
    char_of = np.cumsum((data & 0xC0) != 0x80) - 1  # the character each byte belongs to
    return np.stack([char_of[ends - sizes], char_of[ends - 1] + 1], axis=1)


def _from_bytes(tok: Tokenizer, lengths: np.ndarray, text: str, spans: Spans, ids: np.ndarray) -> np.ndarray:
    offsets = offsets_from_bytes(lengths, text, ids)
    if offsets is None:
        return _with_offsets(tok, text, spans, ids)[1]
    return mask_from_spans(offsets, spans)


def cut_at_spans(text: str, spans: Spans) -> list[tuple[str, bool]]:
    """``text`` in pieces at the spans' edges, each marked trained or not (empty ones left out).

    Args:
        text: The rendered conversation.
        spans: Trained ``(start, end)`` characters, in order.
    """
    pieces, at = [], 0
    for start, end in spans:
        pieces += [(text[at:start], False), (text[start:end], True)]
        at = end
    pieces.append((text[at:], False))
    return [(piece, train) for piece, train in pieces if piece]


def _from_pieces(cut: list[tuple[str, bool]], pieces: list[np.ndarray], whole: np.ndarray) -> np.ndarray | None:
    """The mask where the pieces tokenized apart are the whole's ids; else None."""
    if sum(len(p) for p in pieces) != len(whole) or not np.array_equal(np.concatenate(pieces), whole):
        return None
    return np.concatenate([np.full(len(p), int(train), np.int8) for p, (_, train) in zip(pieces, cut)])


def _with_offsets(
    tok: Tokenizer, text: str, spans: Spans, whole: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Ids and mask from ``tokenizers``' encoding with offsets (checked against the fast
    path's ids where those were made: they must be the same)."""
    encoding = tok.backend.encode(text, add_special_tokens=False)
    ids = np.asarray(encoding.ids, np.int32)
    if whole is not None and not np.array_equal(ids, whole):  # a difference is a bug to be seen, not masked over
        raise AssertionError(
            f"tokenizer {tok.name!r}: the fast path and tokenizers disagree on a rendered conversation"
        )
    offsets = encoding.offsets
    flat = np.fromiter(itertools.chain.from_iterable(offsets), np.int64, count=2 * len(offsets))
    return ids, mask_from_spans(flat.reshape(-1, 2), spans)

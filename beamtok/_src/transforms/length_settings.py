"""A tokenizer file's own truncation and padding, turned off: beamtok tokenizes whole
documents, as ``transformers`` does unless a call asks for lengths."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["without_length_settings"]


def without_length_settings(backend: Any, name: str) -> Any:
    """``backend``, or a copy of it with truncation and padding off where its file sets them.

    Many distributed ``tokenizer.json`` files carry a ``truncation`` (``max_length`` 128, 512...)
    or ``padding`` section, made for the classifier they shipped with; the Rust backend applies
    them on every encode. ``transformers`` turns both off unless a call asks for them, and so
    does beamtok: a document is tokenized whole, and beamtok's own options (``max_length``,
    packing) decide lengths. The copy leaves a caller's backend as it was. The fingerprint is
    made from the copy, so a state or cache made while such a file still cut documents is
    refused rather than mixed with whole ones."""
    if backend.truncation is None and backend.padding is None:
        return backend
    from tokenizers import Tokenizer as RustTokenizer

    log.info(
        "tokenizer %r: its file sets %s; beamtok tokenizes whole documents (as transformers does unless asked), "
        "so those settings are off here",
        name,
        " and ".join(
            f"{what} {settings}"
            for what, settings in (("truncation", backend.truncation), ("padding", backend.padding))
            if settings
        ),
    )
    copy = RustTokenizer.from_str(backend.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy

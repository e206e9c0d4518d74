"""Fast tokenizers: loading, fingerprinting and batched encoding through the Rust backend."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from beamtok.errors import ConfigError
from beamtok.spec import TokenizerRef

__all__ = ["Tokenizer", "load_tokenizer", "resolve_tokenizer"]

_CACHE: dict[str, Tokenizer] = {}
_LOCK = threading.Lock()


class Tokenizer:
    """A Hugging Face fast tokenizer, used through its Rust backend.

    Encoding calls ``encode_batch_fast`` (no offsets), so the per-token work stays in Rust.
    """

    def __init__(self, hf_tokenizer: Any, name: str) -> None:
        if not getattr(hf_tokenizer, "is_fast", False):
            raise ConfigError(f"tokenizer {name!r} is not a fast (Rust) tokenizer")
        self.name = name
        self.hf = hf_tokenizer
        self.backend = hf_tokenizer.backend_tokenizer
        self.bos_id: int | None = hf_tokenizer.bos_token_id
        self.eos_id: int | None = hf_tokenizer.eos_token_id
        pad = hf_tokenizer.pad_token_id
        self.pad_id: int = pad if pad is not None else (self.eos_id if self.eos_id is not None else 0)
        self.vocab_size: int = len(hf_tokenizer)
        serialized = self.backend.to_str()
        specials = json.dumps([self.bos_id, self.eos_id, self.pad_id])
        self.fingerprint = hashlib.sha256((serialized + specials).encode()).hexdigest()[:20]

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[np.ndarray]:
        """Token ids of each text, as int32 arrays."""
        encodings = self.backend.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens)
        return [np.asarray(e.ids, dtype=np.int32) for e in encodings]

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        return str(self.backend.decode([int(i) for i in ids], skip_special_tokens=False))

    def ref(self) -> TokenizerRef:
        return TokenizerRef(self.name, self.fingerprint, self.bos_id, self.eos_id, self.pad_id)

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r}, vocab={self.vocab_size}, fingerprint={self.fingerprint})"


def load_tokenizer(tokenizer: Any, *, trust_remote_code: bool = False) -> Tokenizer:
    """Load a tokenizer from a local directory or hub name, or wrap a loaded HF fast tokenizer."""
    if isinstance(tokenizer, Tokenizer):
        return _remember(tokenizer)
    if not isinstance(tokenizer, str):
        name = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
        return _remember(Tokenizer(tokenizer, str(name)))
    with _LOCK:
        for tok in _CACHE.values():
            if tok.name == tokenizer:
                return tok
    try:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(tokenizer, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, json.JSONDecodeError) as e:
        raise ConfigError(f"cannot load tokenizer {tokenizer!r}: {e}") from e
    except Exception as e:
        raise ConfigError(f"cannot load tokenizer {tokenizer!r}: {type(e).__name__}: {e}") from e
    return _remember(Tokenizer(hf, tokenizer))


def resolve_tokenizer(ref: TokenizerRef) -> Tokenizer:
    """The tokenizer a spec names, loaded once per process and checked against its fingerprint."""
    with _LOCK:
        cached = _CACHE.get(ref.fingerprint)
    if cached is not None:
        return cached
    tok = load_tokenizer(ref.name)
    if tok.fingerprint != ref.fingerprint:
        raise ConfigError(
            f"tokenizer {ref.name!r} now has fingerprint {tok.fingerprint}, but the pipeline was "
            f"built with {ref.fingerprint}; its files changed"
        )
    return tok


def _remember(tok: Tokenizer) -> Tokenizer:
    with _LOCK:
        return _CACHE.setdefault(tok.fingerprint, tok)

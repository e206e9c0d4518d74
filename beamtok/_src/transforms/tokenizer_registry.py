"""The tokenizers a process holds: loaded once per name and files, found again by the
fingerprint a spec records, and rebuilt from their serialized form where a process cannot load
them by name (Beam workers, cache readers)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.transforms.loaded_tokenizers import directory_key, keep, kept
from beamtok._src.transforms.tokenize import Tokenizer, TokenizerRef
from beamtok._src.transforms.tokenizer_location import from_local_files, tokenizer_files_of

__all__ = [
    "is_registered",
    "load_tokenizer",
    "register_serialized",
    "register_tokenizer",
    "resolve_tokenizer",
    "serialize_tokenizers",
]

_CACHE: dict[str, Tokenizer] = {}  # by fingerprint: what a spec's tokenizer resolves to
_BY_NAME: dict[str, Tokenizer] = {}  # by the name it was loaded with (a spec records that name)
_LOCK = threading.Lock()


def _renew_locks() -> None:
    """In a forked child: a new lock, for another thread of the parent may have held it at the fork."""
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks)


def load_tokenizer(tokenizer: Any, *, trust_remote_code: bool = False) -> Tokenizer:
    """Load a tokenizer from a local directory or hub name, or wrap a loaded HF fast tokenizer.

    Args:
        tokenizer: A directory, a hub name kept on this machine, a Tokenizer, or a loaded ``transformers``
            fast tokenizer.
        trust_remote_code: Passed to ``transformers`` for a tokenizer with code of its own.
    Returns:
        The Tokenizer (one per name and files in a process).
    Raises:
        ConfigError: Nothing loadable is there (the message says what is missing).
    """
    if isinstance(tokenizer, Tokenizer):
        return _remember(tokenizer)
    if isinstance(tokenizer, os.PathLike):
        tokenizer = os.fspath(tokenizer)
    if not isinstance(tokenizer, str):
        if not hasattr(tokenizer, "backend_tokenizer") and not hasattr(tokenizer, "is_fast"):
            raise ConfigError(
                f"tokenize() takes a tokenizer directory, a hub name, a beamtok Tokenizer or a loaded transformers "
                f"fast tokenizer; got {type(tokenizer).__name__} {tokenizer!r}"[:300]
            )
        name = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
        return _remember(Tokenizer.from_hf(tokenizer, str(name)))
    with _LOCK:
        known = _BY_NAME.get(tokenizer)
    if known is not None:
        return known
    tok = _from_kept_or_loaded(tokenizer, trust_remote_code)
    # The same files under another name (a relative and an absolute path) keep their own name:
    # the spec records it, and it must not depend on what this process loaded first.
    with _LOCK:
        _CACHE.setdefault(tok.fingerprint, tok)
        return _BY_NAME.setdefault(tokenizer, tok)


def _from_kept_or_loaded(name: str, trust_remote_code: bool) -> Tokenizer:
    """A directory's tokenizer as this machine kept it, else loaded through ``transformers``
    (and kept: :mod:`beamtok._src.transforms.loaded_tokenizers`)."""
    directory = None if trust_remote_code else tokenizer_files_of(name)
    key = None if directory is None else directory_key(directory)
    loaded = None if key is None else kept(key)
    if loaded is not None and directory is not None:
        return Tokenizer.from_loaded(loaded, name, directory)
    hf = from_local_files(name, trust_remote_code)
    try:
        from transformers import AutoTokenizer

        if hf is None:
            hf = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, json.JSONDecodeError) as e:
        raise ConfigError(f"cannot load tokenizer {name!r}: {e}") from e
    except Exception as e:
        raise ConfigError(f"cannot load tokenizer {name!r}: {type(e).__name__}: {e}") from e
    tok = Tokenizer.from_hf(hf, name)
    if key is not None:
        keep(key, tok.kept_form())
    return tok


def resolve_tokenizer(ref: TokenizerRef) -> Tokenizer:
    """The tokenizer a spec names, loaded once per process and checked against its fingerprint.

    Args:
        ref: The spec's tokenizer: its name (a directory or file) and fingerprint.

    Raises:
        ConfigError: The tokenizer found under that name is not the one the spec was made with.
    """
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


def serialize_tokenizers(refs: Sequence[TokenizerRef]) -> list[dict[str, Any]]:
    """The tokenizers ``refs`` name, serialized for processes that cannot load them by name."""
    return [resolve_tokenizer(ref).serialize() for ref in refs]


def is_registered(fingerprint: str) -> bool:
    """Whether this process holds the tokenizer of this fingerprint."""
    with _LOCK:
        return fingerprint in _CACHE


def register_serialized(blobs: Sequence[dict[str, Any]]) -> list[Tokenizer]:
    """Rebuild serialized tokenizers and make :func:`resolve_tokenizer` return them; return
    the tokenizers this process holds for them, in order.

    Once per process: a tokenizer whose fingerprint this process already holds is not rebuilt,
    so every DoFn instance of a Beam worker (several per SDK process, one per bundle thread
    and stage) shares one tokenizer and its fast-path encoder."""
    held = []
    for blob in blobs:
        with _LOCK:
            known = _CACHE.get(blob["fingerprint"])
        held.append(known if known is not None else register_tokenizer(Tokenizer.from_serialized(blob)))
    return held


def register_tokenizer(tok: Tokenizer) -> Tokenizer:
    """Make ``tok`` the one :func:`resolve_tokenizer` returns for its fingerprint."""
    return _remember(tok)


def _remember(tok: Tokenizer) -> Tokenizer:
    with _LOCK:
        return _CACHE.setdefault(tok.fingerprint, tok)

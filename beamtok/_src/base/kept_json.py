"""Small JSON values kept on disk between runs, under the tokenizer cache
(``$BEAMTOK_TOKENIZER_CACHE``, else ``~/.cache/beamtok/tokenizers``): what ``transformers``
made of a tokenizer directory, what a normal form does to each character. An entry is
written whole or not at all; one that cannot be read or written is made anew."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["TOKENIZER_CACHE_ENV", "cache_root", "keep_json", "kept_json"]

TOKENIZER_CACHE_ENV = "BEAMTOK_TOKENIZER_CACHE"


def cache_root() -> Path:
    return Path(
        os.environ.get(TOKENIZER_CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "beamtok", "tokenizers")
    )


def kept_json(name: str) -> Any:
    """What :func:`keep_json` kept under ``name`` in the cache, or None (none kept, or unreadable)."""
    path = cache_root() / f"{name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.debug("kept entry %s unreadable (%s); made anew", path, e)
        return None


def keep_json(name: str, value: Any) -> None:
    """Keep ``value`` (plain JSON) under ``name`` in the cache, whole or not at all; a cache
    that cannot be written is passed over."""
    root = cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, scratch = tempfile.mkstemp(dir=root, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(value, f)
            os.replace(scratch, root / f"{name}.json")  # a reader never sees half an entry
        finally:
            if os.path.exists(scratch):
                os.unlink(scratch)
    except OSError as e:
        log.debug("cannot keep %s under %s: %s", name, root, e)

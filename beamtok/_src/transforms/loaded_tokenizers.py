"""What ``transformers`` made of a local tokenizer directory (or of the snapshot a hub name
names in the Hugging Face cache), kept on this machine.

Loading a directory through ``AutoTokenizer`` imports ``transformers`` and, through it, torch:
seconds of every process that loads a tokenizer by its directory (each ``beamtok`` command,
each training rank, each JAX process). What beamtok takes from the loaded tokenizer is small
and plain: the Rust backend as JSON, the BOS, EOS and PAD ids, the vocabulary size with added
tokens and the chat template. That is written once under ``$BEAMTOK_TOKENIZER_CACHE`` (default
``~/.cache/beamtok/tokenizers``), keyed by

- the bytes of every file directly in the directory (model weights left out by their
  extension: they do not make the tokenizer and can be gigabytes),
- the ``transformers`` and ``tokenizers`` versions (another version may build another backend
  from the same files: transformers 5 builds GPT-2's from ``vocab.json`` and ``merges.txt``).

A later process with the same files and the same libraries reads it back without importing
``transformers``. A file edited, added or removed, or another library version, is another key,
so a kept entry is never used for files it was not made from. Directories loaded with
``trust_remote_code`` are never kept (their code may make a different tokenizer every run).
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass
from importlib import metadata

from beamtok._src.base.kept_json import keep_json, kept_json

__all__ = ["LoadedTokenizer", "directory_key", "keep", "kept"]

FORMAT = 1
WEIGHT_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".h5",
    ".msgpack",
    ".onnx",
    ".gguf",
    ".tflite",
    ".ot",
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedTokenizer:
    """What beamtok keeps of a tokenizer ``transformers`` loaded from a directory."""

    backend_json: str
    bos_id: int | None
    eos_id: int | None
    pad_id: int | None
    vocab_size: int
    chat_template: str | None


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def directory_key(directory: str) -> str | None:
    """Names the tokenizer ``transformers`` makes of exactly these files, with these libraries
    (None when a file cannot be read: nothing is kept, and transformers says what is wrong)."""
    try:
        return _digest_of(directory)
    except OSError as e:
        log.debug("cannot read %s to key its tokenizer: %s", directory, e)
        return None


def _digest_of(directory: str) -> str:
    digest = hashlib.sha256(
        f"format {FORMAT}\ntransformers {_version('transformers')}\ntokenizers {_version('tokenizers')}\n".encode()
    )
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if not entry.is_file() or entry.name.endswith(WEIGHT_SUFFIXES):
            continue
        content = hashlib.sha256()
        with open(entry.path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                content.update(block)
        digest.update(f"{entry.name}\0{content.hexdigest()}\n".encode())
    return digest.hexdigest()[:32]


def kept(key: str) -> LoadedTokenizer | None:
    """The tokenizer kept under ``key`` (:func:`directory_key`), or None (none kept, or unreadable)."""
    blob = kept_json(key)
    try:
        return None if blob is None else LoadedTokenizer(**{k: blob[k] for k in LoadedTokenizer.__dataclass_fields__})
    except (KeyError, TypeError) as e:  # a broken entry is loaded anew and rewritten
        log.debug("kept tokenizer %s unreadable (%s); loading it through transformers", key, e)
        return None


def keep(key: str, loaded: LoadedTokenizer) -> None:
    """Keep ``loaded`` under ``key`` (:func:`directory_key`)."""
    keep_json(key, loaded.__dict__)

"""bpe-openai (an optional, alpha engine) for files that are one of its built-in encodings,
cl100k and o200k, loaded without its package's start-up cost."""

from __future__ import annotations

import binascii
import gzip
import warnings
from pathlib import Path
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.exact_encoder import MissingExtra, OtherForm
from beamtok._src.engines.ranks import CL100K_PATTERN, O200K_PATTERN

__all__ = ["bpe_openai_engine"]


def bpe_openai_engine(pattern: str, ranks: dict[bytes, int]) -> tuple[Any, bool]:
    """bpe-openai's native encoder for one of its built-in encodings (cl100k, o200k): the
    file's ranks must be that encoding's very ranks, and its split that encoding's, spelled
    the same (``True``: own spelling) or, for ranks of the encoding's size, to be compared on
    the split sample by the caller (``False``).

    Args:
        pattern: The file's split pattern.
        ranks: The file's ranks.

    Returns:
        ``(encoder, own_spelling)``.

    Raises:
        MissingExtra: bpe-openai is not installed.
        OtherForm: The file is neither of its encodings.
        ConfigError: Its data cannot be read, or the ranks differ from the encoding's.
    """
    own = {CL100K_PATTERN: "cl100k_base", O200K_PATTERN: "o200k_base"}.get(pattern)
    sized = {100_256: "cl100k_base", 199_998: "o200k_base"}.get(len(ranks))
    encoding = own or sized
    if encoding is None:
        raise OtherForm(
            f"bpe-openai encodes cl100k and o200k only; this file's split and {len(ranks):,} ranks are neither"
        )
    located = _bpe_openai_bindings()
    if located is None:
        raise MissingExtra("bpe-openai is not installed: pip install bpe-openai", install="bpe-openai")
    package, bindings = located
    data = package / "data" / f"{encoding}.tiktoken.gz"
    try:
        lines = gzip.decompress(data.read_bytes()).splitlines()
        theirs = {binascii.a2b_base64(token): int(rank) for token, rank in (line.split() for line in lines if line)}
    except (OSError, ValueError) as e:
        raise ConfigError(f"bpe-openai's {encoding} ranks cannot be read from {data}: {e}") from None
    if theirs != ranks:
        raise ConfigError(f"the file's ranks are not {encoding}'s, the only ones bpe-openai encodes with that split")
    return bindings.tokenizer_for_encoding(encoding), own is not None


def _bpe_openai_bindings() -> tuple[Path, Any] | None:
    """bpe-openai's directory and its compiled module, loaded without running the package's
    ``__init__``: that decodes the ranks of every encoding it knows (start-up in every
    process and Beam worker); the compiled module alone needs none of it."""
    import importlib.util
    import sys

    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    loaded = sys.modules.get("bpe_openai._bindings")
    if loaded is not None:
        return package, loaded
    for path in sorted(package.glob("_bindings*.so")) + sorted(package.glob("_bindings*.pyd")):
        try:
            found = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
            if found is None or found.loader is None:
                continue
            module = importlib.util.module_from_spec(found)
            found.loader.exec_module(module)
        except ImportError:
            continue
        if hasattr(module, "tokenizer_for_encoding"):
            return package, module
    try:  # an install laid out otherwise: the package's own import
        with warnings.catch_warnings():  # its import calls a deprecated importlib.resources API
            warnings.simplefilter("ignore", DeprecationWarning)
            from bpe_openai import _bindings
    except ImportError:
        return None
    return package, _bindings

"""The ``engine=`` option of ``tokenize()`` and ``Tokenizer.encode_batch``: which encoder a
step calls. ``"auto"``: the exact engine ``choose`` takes, else ``tokenizers``; ``"exact"``:
that engine or a ConfigError naming every refusal; ``"tokenizers"``: Hugging Face
``tokenizers`` itself. Every choice gives the same tokens, so none is in a fingerprint."""

from __future__ import annotations

import warnings

from beamtok._src.base.validate import check_choice

__all__ = ["ENGINE_MODES", "engine_mode"]

ENGINE_MODES = ("auto", "exact", "tokenizers")
OLD_BACKENDS = {"auto": "auto", "tiktoken": "exact", "hf": "tokenizers"}


def engine_mode(engine: str, backend: str | None, stacklevel: int = 3) -> str:
    """The engine option, checked, from ``engine`` or the deprecated ``backend``.

    Args:
        engine: ``"auto"``, ``"exact"`` or ``"tokenizers"``.
        backend: The old option (``"auto"``, ``"tiktoken"``, ``"hf"``), or None.
        stacklevel: Where the deprecation warning points (the user's call).

    Returns:
        One of :data:`ENGINE_MODES`.
    """
    if backend is not None:
        check_choice(backend, "backend", tuple(OLD_BACKENDS))
        new = OLD_BACKENDS[backend]
        warnings.warn(
            f"backend={backend!r} is now engine={new!r}; backend= goes in the next release",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        return new
    return check_choice(engine, "engine", ENGINE_MODES)

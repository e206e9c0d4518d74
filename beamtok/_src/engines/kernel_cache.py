"""Keep numba's on-disk kernel cache true to the sources of every compiled module.

numba keys a cached kernel on its own file's timestamp and size only, so a kernel that calls
a helper from another file (``bpe_native`` and ``unigram_native`` call ``compiled_tables``)
keeps running the helper as it was compiled after that file changes: a checkout that
updates ``compiled_tables.py`` alone would run stale code, silently. Before the first kernel
is compiled, :func:`drop_stale_kernels` compares a digest of all the compiled modules'
sources with the one written beside the cache, and drops the cache of every one of them
where it differs. An install whose directory cannot be written caches in the user's
directory instead, keyed by each file's path; its files change only all at once."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["COMPILED_MODULES", "drop_stale_kernels"]

COMPILED_MODULES = (
    "compiled_tables",
    "compiled_word_cache",
    "bpe_native",
    "unigram_native",
    "byte_level_split",
    "byte_level_native",
    "split_rules",  # its bits are constants in byte_level_split's kernels
)
STAMP = "beamtok-kernels.sha256"


def drop_stale_kernels(package: Path = Path(__file__).parent) -> bool:
    """Drop the cached kernels of ``package``'s compiled modules (in its ``__pycache__``)
    unless the digest of their sources matches the one written there; True if any were
    dropped. A directory that cannot be written is left as it is."""
    digest = hashlib.sha256()
    try:
        for name in COMPILED_MODULES:
            digest.update((package / f"{name}.py").read_bytes())
    except OSError:  # sources not on disk (imported from a zip): numba caches nothing beside them either
        return False
    cache = package / "__pycache__"
    stamp = cache / STAMP
    try:
        if stamp.read_text(encoding="ascii") == digest.hexdigest():
            return False
    except OSError:  # no stamp yet (or unreadable): write it, after dropping what may be stale
        pass
    dropped = False
    try:
        cache.mkdir(exist_ok=True)
        for path in cache.glob("*.nb[ic]"):
            if path.name.split(".", 1)[0] in COMPILED_MODULES:
                path.unlink(missing_ok=True)
                dropped = True
        partial = cache / f"{STAMP}.{os.getpid()}"
        partial.write_text(digest.hexdigest(), encoding="ascii")
        partial.replace(stamp)  # atomic: processes starting together read one stamp or the other
    except OSError:
        return dropped
    return dropped

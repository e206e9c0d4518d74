"""Load checks an engine passed for a file, and what the compiled byte-level engine learned of
characters, remembered on disk so later processes skip them.

The compiled byte-level engine checks a file against ``tokenizers`` on every string of the
split sample before it is taken (most of its set-up: ``docs/performance.md``), in every process that loads the file: each
DataLoader worker that builds its own, each Beam worker, each run. The outcome depends only on
the file, the engine's rule for it and the code on both sides, so a pass is remembered under
a digest of all of them (the file's text, the rule, the sources of ``beamtok/_src/engines``
and the versions of ``tokenizers`` and ``numba``): a change to any is a new key, and the
check runs again. Only passes are kept; a refusal is always checked afresh. The classes of
characters the compiled byte-level cut learned for a split (``char_classes``), each checked
against the file's split when learned, are kept the same way, under the split's patterns and
rule (:func:`kept_file`).

The marks live in ``$BEAMTOK_CHECKS_DIR`` (default ``~/.cache/beamtok/engine-checks``); ``off``
keeps nothing (the test suite sets it, so every test checks). A directory that cannot be
written keeps nothing either.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
from pathlib import Path

__all__ = ["CHECKS_ENV", "kept_file", "passed_before", "remember_passed"]

CHECKS_ENV = "BEAMTOK_CHECKS_DIR"


def _directory() -> Path | None:
    chosen = os.environ.get(CHECKS_ENV, "")
    if chosen.strip().lower() == "off":
        return None
    return Path(chosen) if chosen else Path.home() / ".cache" / "beamtok" / "engine-checks"


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """The engines' sources and the versions of what they are checked against."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    for package in ("tokenizers", "numba"):
        try:
            digest.update(f"{package}={importlib.metadata.version(package)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{package} missing".encode())
    return digest.hexdigest()


def _mark(engine: str, tokenizer_json: str, detail: str) -> Path | None:
    directory = _directory()
    if directory is None:
        return None
    digest = hashlib.sha256()
    for part in (_code_digest(), engine, detail, tokenizer_json):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return directory / digest.hexdigest()


def passed_before(engine: str, tokenizer_json: str, detail: str) -> bool:
    """Whether ``engine`` passed its checks for this file, with this ``detail`` (its rule), in
    an earlier process on this machine.

    Args:
        engine: The engine's name.
        tokenizer_json: The file's text.
        detail: What else the checks' outcome depends on (the engine's rule for the file).
    """
    mark = _mark(engine, tokenizer_json, detail)
    return mark is not None and mark.exists()


def remember_passed(engine: str, tokenizer_json: str, detail: str) -> None:
    """Remember that ``engine`` passed its checks for this file (see :func:`passed_before`).

    Args:
        engine: The engine's name.
        tokenizer_json: The file's text.
        detail: What else the checks' outcome depends on.
    """
    mark = _mark(engine, tokenizer_json, detail)
    if mark is None:
        return
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
    except OSError:  # a directory that cannot be written keeps nothing
        return


def kept_file(kind: str, detail: str) -> Path | None:
    """Where what an engine learned of ``kind`` for ``detail`` is kept (None where nothing is
    kept: ``$BEAMTOK_CHECKS_DIR`` is ``off``), under the same code digest as the passes.

    Args:
        kind: What is kept, as a file name's start (``char-classes``).
        detail: What it depends on besides the code (the split's patterns and rule).
    """
    mark = _mark(kind, "", detail)
    return None if mark is None else mark.with_name(f"{kind}-{mark.name[:32]}.npy")

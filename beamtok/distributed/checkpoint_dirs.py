"""Numbered checkpoint directories that are only ever read once complete.

A DCP checkpoint is a directory of files written by every rank, its ``.metadata`` last; a job
killed while writing leaves a directory that may look whole to a reader that only lists files.
:func:`mark_complete` (called by one process after ``dcp.save`` returned on it, which happens
only once every rank's files and the metadata are written) adds a marker file by an atomic
rename; :func:`newest_complete` picks the newest directory that carries it, so a cut-off
checkpoint is never loaded.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["COMPLETE_MARKER", "mark_complete", "newest_complete", "step_directory"]

COMPLETE_MARKER = "COMPLETE"
_STEP_DIRECTORY = re.compile(r"^step_(\d+)$")


def step_directory(root: str | os.PathLike[str], step: int) -> Path:
    """Where the checkpoint of global step ``step`` goes under ``root``."""
    return Path(root) / f"step_{step:08d}"


def mark_complete(directory: str | os.PathLike[str]) -> None:
    """Mark a checkpoint directory as fully written (atomically: a reader sees it or not)."""
    directory = Path(directory)
    partial = directory / f".{COMPLETE_MARKER}.partial"
    with open(partial, "w") as f:
        f.write("complete\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, directory / COMPLETE_MARKER)


def newest_complete(root: str | os.PathLike[str]) -> tuple[int, Path] | None:
    """The step and directory of the newest complete checkpoint under ``root`` (None: none)."""
    root = Path(root)
    if not root.is_dir():
        return None
    found = []
    for path in root.iterdir():
        match = _STEP_DIRECTORY.match(path.name)
        if match and (path / COMPLETE_MARKER).is_file():
            found.append((int(match.group(1)), path))
    return max(found) if found else None

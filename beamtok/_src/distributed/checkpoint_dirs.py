"""Numbered checkpoint directories that are only ever read once complete.

A DCP checkpoint is a directory of files written by every rank, its ``.metadata`` last; a job
killed while writing leaves a directory that may look whole to a reader that only lists files.
:func:`mark_complete` (called by one process after ``dcp.save`` returned on it, which happens
only once every rank's files and the metadata are written) adds a marker file by an atomic
rename, listing every file of the checkpoint and its size; :func:`newest_complete` picks the
newest directory that carries it and still holds those files, so a cut-off checkpoint is never
loaded, and one that lost a file since (a partial copy, a cleanup gone wrong) is named in one
warning and passed over for the complete one before it. Markers of earlier versions list no
files and are taken as they are.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

from beamtok._src.sources.urls import nearest_name

__all__ = ["COMPLETE_MARKER", "mark_complete", "missing_files", "newest_complete", "step_directory"]

log = logging.getLogger(__name__)

COMPLETE_MARKER = "COMPLETE"
_STEP_DIRECTORY = re.compile(r"^step_(\d+)$")


def step_directory(root: str | os.PathLike[str], step: int) -> Path:
    """Where the checkpoint of global step ``step`` goes under ``root``.

    Args:
        root: The checkpoints' directory.
        step: The global step.
    Returns:
        The directory of that step's checkpoint.
    """
    return Path(root) / f"step_{step:08d}"


def mark_complete(directory: str | os.PathLike[str]) -> None:
    """Mark a checkpoint directory as fully written (atomically: a reader sees it or not).

    Args:
        directory: A checkpoint directory, every file written.
    """
    directory = Path(directory)
    partial = directory / f".{COMPLETE_MARKER}.partial"
    files = {p.name: p.stat().st_size for p in sorted(directory.iterdir()) if p.is_file() and p.name != partial.name}
    with open(partial, "w") as f:
        json.dump({"complete": True, "files": files}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, directory / COMPLETE_MARKER)


def missing_files(directory: str | os.PathLike[str]) -> list[str]:
    """The files a complete checkpoint's marker lists that are gone or of another size now
    (``name (N bytes, now M)``); empty for a marker that lists none.

    Args:
        directory: A checkpoint directory.
    Returns:
        What its marker lists that is gone or changed.
    """
    directory = Path(directory)
    try:
        listed = json.loads((directory / COMPLETE_MARKER).read_text()).get("files", {})
    except (ValueError, AttributeError):  # a marker of an earlier version: "complete"
        return []
    problems = []
    for name, size in sorted(listed.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{name} (missing)")
        elif path.stat().st_size != size:
            problems.append(f"{name} ({size} bytes written, {path.stat().st_size} now)")
    return problems


def newest_complete(root: str | os.PathLike[str]) -> tuple[int, Path] | None:
    """The step and directory of the newest complete checkpoint under ``root`` (None: none).
    A checkpoint marked complete that has lost a file since is passed over for the one before
    it, with one warning naming the file.

    Args:
        root: The checkpoints' directory.
    Returns:
        ``(step, directory)``, or None (with a warning naming ``root`` and the nearest
        existing name when the folder does not exist).
    """
    root = Path(root)
    if not root.is_dir():
        # a first run has no folder yet; a mistyped one would silently start training from scratch
        log.warning(
            "checkpoint folder %s does not exist: starting from scratch%s",
            root,
            nearest_name(str(root)) or " (it is made by the first save)",
        )
        return None
    found = []
    for path in root.iterdir():
        match = _STEP_DIRECTORY.match(path.name)
        if match and (path / COMPLETE_MARKER).is_file():
            found.append((int(match.group(1)), path))
    for step, path in sorted(found, reverse=True):
        problems = missing_files(path)
        if not problems:
            return step, path
        log.warning(
            "checkpoint %s was marked complete but %s; passed over for an earlier one", path, ", ".join(problems)
        )
    return None

"""The tests mirror the package: a folder per subpackage of ``beamtok/_src`` (and ``project/``
for the package as a whole), each on pytest's path and none skipped by ``norecursedirs``."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import tomllib

from conftest import ROOT

OPTIONS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
TEST_FOLDERS = sorted({p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")})


def test_every_test_folder_is_on_the_path_and_collected():
    """A folder missing from ``pythonpath`` cannot import its neighbours' helpers by name; one
    that ``norecursedirs`` matches (pytest skips folders named build by default) is silently
    never run."""
    assert set(TEST_FOLDERS) <= set(OPTIONS["pythonpath"]), set(TEST_FOLDERS) - set(OPTIONS["pythonpath"])
    skipped = [
        folder
        for folder in TEST_FOLDERS
        for part in Path(folder).parts
        if any(fnmatch.fnmatch(part, pattern) for pattern in OPTIONS["norecursedirs"])
    ]
    assert not skipped, skipped


def test_each_test_folder_mirrors_a_subpackage():
    packages = {
        p.parent.relative_to(ROOT / "beamtok" / "_src").as_posix()
        for p in (ROOT / "beamtok" / "_src").rglob("__init__.py")
    }
    unmatched = [
        folder
        for folder in TEST_FOLDERS
        if folder not in ("tests", "tests/project") and folder.removeprefix("tests/") not in packages
    ]
    assert not unmatched, unmatched

"""The README's Python examples and module docstring examples run as written (notebooks:
tests/test_notebooks.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

README_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_examples():
    assert len(README_BLOCKS) >= 3


def test_readme_examples_run_each_in_a_new_process(tmp_path):
    """Blocks run in order, each in its own interpreter, so the resume really crosses processes."""
    os.symlink(ROOT / "data", tmp_path / "data")
    os.symlink(ROOT / "examples", tmp_path / "examples")  # the README's data config
    for i, block in enumerate(README_BLOCKS):
        proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"README python block {i} failed:\n{block}\n{proc.stderr}"
    assert json.loads((tmp_path / "build" / "state.json").read_text())["beamtok_state"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "data", "examples"]  # every output under build/


@pytest.mark.parametrize("module", ["beamtok.stream.dataset"])
def test_module_docstring_example_runs(module, monkeypatch):
    import importlib

    doc = importlib.import_module(module).__doc__
    example = "\n".join(line[4:] for line in doc.splitlines() if line.startswith("    "))
    monkeypatch.chdir(ROOT)
    exec(compile("from beamtok import Dataset\n" + example, module, "exec"), {})

"""The README's and the guides' Python examples, the docs site, and module docstring examples
(notebooks: tests/project/test_notebooks.py)."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def guide_pages() -> list[str]:
    """The pages of the site's Guide section, in the order the site lists them."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    guide = next(entry["Guide"] for entry in nav if isinstance(entry, dict) and "Guide" in entry)
    return [next(iter(page.values())) for page in guide]


def blocks_of(path) -> list[str]:
    return PYTHON_BLOCK.findall(path.read_text())


def test_the_readme_is_short_and_its_guides_hold_examples():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
    assert len(blocks_of(ROOT / "README.md")) >= 3
    assert sum(len(blocks_of(ROOT / "docs" / page)) for page in guide_pages()) >= 10


def test_readme_and_guide_examples_run_each_in_a_new_process(tmp_path):
    """The README's blocks, then each guide page's in the site's order, each in its own
    interpreter (so a resume really crosses processes), all in one working directory."""
    os.symlink(ROOT / "data", tmp_path / "data")
    os.symlink(ROOT / "examples", tmp_path / "examples")  # the data config
    sources = [ROOT / "README.md", *(ROOT / "docs" / page for page in guide_pages())]
    for source in sources:
        for i, block in enumerate(blocks_of(source)):
            proc = subprocess.run(
                [sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300
            )
            assert proc.returncode == 0, f"{source.name} python block {i} failed:\n{block}\n{proc.stderr}"
            assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, (
                f"{source.name} block {i}:\n{proc.stderr}"
            )
    assert json.loads((tmp_path / "build" / "state.json").read_text())["beamtok_state"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "data", "examples"]  # every output under build/


def test_every_docs_page_is_on_the_site():
    listed = set()

    def walk(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(value, list):
                walk(value)
            else:
                listed.add(value)

    walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    assert listed == {p.name for p in (ROOT / "docs").glob("*.md")}


@pytest.mark.skipif(
    shutil.which("mkdocs", path=os.path.dirname(sys.executable)) is None, reason="mkdocs is in the dev extra"
)
def test_the_site_builds_strictly_with_generated_pages(tmp_path):
    """mkdocs build --strict: no broken link or anchor; the CLI page carries every option of
    the table, the performance page every results file."""
    from beamtok._src.core.cache_options import CACHE_OPTIONS

    mkdocs = os.path.join(os.path.dirname(sys.executable), "mkdocs")
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()
    for option in CACHE_OPTIONS:
        assert f"<code>{option.name}</code>" in cli, option.name
    performance = (tmp_path / "site" / "performance" / "index.html").read_text()
    for result in (ROOT / "benchmarks" / "results").glob("*.json"):
        assert f"<code>{result.name}</code>" in performance, result.name
    from public_surface import public_objects

    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for module, name, _ in public_objects():
        assert f'id="{module}.{name}"' in api, f"{module}.{name} has no entry in the API reference"
    for page in (tmp_path / "site").rglob("*.html"):
        raw = re.findall(r":(?:func|meth|class|mod|attr|data|exc|obj):<code>", page.read_text())
        assert not raw, f"{page.relative_to(tmp_path)} shows Sphinx roles as text: {raw[:3]}"
    assert 'href="#beamtok.Dataset.cache"' in api  # a role became a link
    # Dataset's methods are written in the modules of their transformations and bound by name
    # (docs/hooks/bound_methods.py renders them): each has its entry and its parameter table
    from beamtok import Dataset

    for name in [n for n in vars(Dataset) if not n.startswith("_") and callable(getattr(Dataset, n))]:
        heading = f'id="beamtok.Dataset.{name}" class="doc doc-heading"'
        start = api.find(heading)
        assert start >= 0, f"Dataset.{name} has no entry in the API reference"
        entry = api[start : api.find('class="doc doc-heading"', start + len(heading))]
        assert "Parameters:" in entry or "Returns:" in entry, f"Dataset.{name} renders without its docstring sections"


@pytest.mark.parametrize("module", ["beamtok._src.dataset.dataset"])
def test_module_docstring_example_runs(module, monkeypatch):

    doc = importlib.import_module(module).__doc__
    example = "\n".join(line[4:] for line in doc.splitlines() if line.startswith("    "))
    monkeypatch.chdir(ROOT)
    exec(compile("from beamtok import Dataset\n" + example, module, "exec"), {})

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
    assert json.loads((tmp_path / "build" / "state.json").read_text())["beamtok_state"] == 2
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
    from beamtok.core.cache_options import CACHE_OPTIONS

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
    import beamtok

    api = (tmp_path / "site" / "api" / "index.html").read_text()
    errors = {"BeamtokError", "CacheError", "ConfigError", "InputError", "StateError"}  # under beamtok.base.errors
    for name in set(beamtok.__all__) - {"__version__"}:
        anchor = f"beamtok.base.errors.{name}" if name in errors else f"beamtok.{name}"
        assert f'id="{anchor}"' in api, f"{name} has no entry in the API reference"
    for page in (tmp_path / "site").rglob("*.html"):
        raw = re.findall(r":(?:func|meth|class|mod|attr|data|exc|obj):<code>", page.read_text())
        assert not raw, f"{page.relative_to(tmp_path)} shows Sphinx roles as text: {raw[:3]}"
    assert 'href="#beamtok.Dataset.cache"' in api  # a role became a link
    undocumented = [
        f"{page}: {anchor}: {name}"
        for page in API_PAGES
        for anchor, names in api_callables(page)
        for name in names
        if not re.search(
            rf"<code>(<span [^>]*>)?\*{{0,2}}{re.escape(name)}(</span>)?</code>",
            api_section(site_page(tmp_path, page), anchor),
        )
    ]
    assert not undocumented, f"parameters the API reference does not list: {undocumented}"
    packages = site_page(tmp_path, "api-packages.md")
    for package in ("cache", "stream", "engines", "transforms", "beam", "dataset"):
        for name in importlib.import_module(f"beamtok.{package}").__all__:
            assert f'id="beamtok.{package}.{name}"' in packages, f"beamtok.{package}.{name} is not on the page"


API_PAGES = ("api.md", "api-packages.md")
"""The reference pages made from docstrings."""


def site_page(site_root, page: str) -> str:
    return (site_root / "site" / page.removesuffix(".md") / "index.html").read_text()


def api_callables(page: str) -> list[tuple[str, list[str]]]:
    """Every callable ``docs/<page>`` renders (a module's exports, or the object named), with the
    names of its parameters (a dataclass: its fields), keyed by its anchor on the page."""
    import dataclasses
    import inspect

    def params(function: object) -> list[str]:
        try:
            signature = inspect.signature(function)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return []
        return [name for name in signature.parameters if name not in ("self", "cls")]

    def of_class(anchor: str, cls: type) -> list[tuple[str, list[str]]]:
        if dataclasses.is_dataclass(cls):
            out = [(anchor, [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")])]
        elif getattr(cls, "_is_protocol", False):
            out = []  # a protocol is not made
        else:
            out = [(anchor, params(cls.__init__) if "__init__" in cls.__dict__ else [])]
        for klass in cls.__mro__:
            if not klass.__module__.startswith("beamtok"):
                continue
            for name, value in klass.__dict__.items():
                function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
                if not name.startswith("_") and inspect.isfunction(function):
                    out.append((f"{anchor}.{name}", params(function)))
        return out

    found: list[tuple[str, list[str]]] = []
    for line in (ROOT / "docs" / page).read_text().splitlines():
        if not line.startswith("::: "):
            continue
        target = line[4:].strip()
        try:
            module = importlib.import_module(target)
            items = [(f"{target}.{name}", getattr(module, name)) for name in getattr(module, "__all__", [])]
        except ImportError:
            parent, _, name = target.rpartition(".")
            items = [(target, getattr(importlib.import_module(parent), name))]
        for anchor, obj in items:
            if inspect.isclass(obj) and not issubclass(obj, BaseException):
                found += of_class(anchor, obj)
            elif inspect.isfunction(obj):
                found.append((anchor, params(obj)))
    return [(anchor, names) for anchor, names in found if names]


def api_section(page: str, anchor: str) -> str:
    """The part of the API page from ``anchor``'s heading to the next object's."""
    start = page.find(f'id="{anchor}"')
    assert start >= 0, f"{anchor} is not on the API page"
    following = re.compile(r'id="beamtok\.[^"]+" class="doc doc-heading"').search(page, start + len(anchor) + 5)
    return page[start : following.start() if following else len(page)]


@pytest.mark.parametrize("module", ["beamtok.dataset.dataset"])
def test_module_docstring_example_runs(module, monkeypatch):

    doc = importlib.import_module(module).__doc__
    example = "\n".join(line[4:] for line in doc.splitlines() if line.startswith("    "))
    monkeypatch.chdir(ROOT)
    exec(compile("from beamtok import Dataset\n" + example, module, "exec"), {})

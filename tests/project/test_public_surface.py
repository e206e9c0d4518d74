"""The edge between public and private: the public names and signatures are held to a
checked-in snapshot, each documents its parameters, nothing public lives under ``_src``, the
docs and examples use public names only, and the namespaces import nothing optional."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

from docstring_sections import documented_args, parameters
from public_surface import PUBLIC_MODULES, SNAPSHOT, own_members, public_objects, surface

ROOT = Path(__file__).resolve().parents[2]
INTERNALS_DOCS = ("docs/architecture.md", "docs/development.md")  # pages about the internals, for contributors


def test_the_public_surface_is_the_snapshot():
    """A change to a public name or signature must come with ``python tests/project/public_surface.py``
    and be seen in review as a diff of ``public_api.json``."""
    saved = json.loads(SNAPSHOT.read_text())
    now = surface()
    changes = [
        f"{module}.{name}: {json.dumps(saved.get(module, {}).get(name))} -> {json.dumps(now.get(module, {}).get(name))}"
        for module in sorted(set(saved) | set(now))
        for name in sorted(set(saved.get(module, {})) | set(now.get(module, {})))
        if saved.get(module, {}).get(name) != now.get(module, {}).get(name)
    ]
    assert not changes, "the public surface changed (run python tests/project/public_surface.py):\n" + "\n".join(
        changes
    )


def test_the_top_level_is_about_a_dozen_names():
    import beamtok

    assert len(beamtok.__all__) <= 15
    assert all(not name.startswith("_") or name == "__version__" for name in beamtok.__all__)


def test_every_public_callable_names_its_parameters_in_its_docstring():
    """Read from the objects' own docstrings (Google ``Args:``/``Attributes:`` sections), not
    from the rendered site."""
    missing = []

    def check(where: str, function: object, owner: object = None) -> None:
        named = documented_args(inspect.getdoc(function))
        if owner is not None:
            named |= documented_args(inspect.getdoc(owner))
        lacking = [p for p in parameters(function) if p not in named]
        if lacking:
            missing.append(f"{where}: {lacking}")

    for module, name, obj in public_objects():
        where = f"{module}.{name}"
        if inspect.isfunction(obj):
            check(where, obj)
        if not inspect.isclass(obj) or issubclass(obj, BaseException):
            continue
        if dataclasses.is_dataclass(obj):
            named = documented_args(obj.__doc__)
            lacking = [f.name for f in dataclasses.fields(obj) if not f.name.startswith("_") and f.name not in named]
            if lacking:
                missing.append(f"{where} fields: {lacking}")
        elif "__init__" in vars(obj) and not getattr(obj, "_is_protocol", False):
            check(where, obj.__init__, obj)
        for member, value in own_members(obj):
            function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            if inspect.isfunction(function):
                check(f"{where}.{member}", function)
    assert not missing, "public callables whose docstrings do not name these parameters:\n" + "\n".join(missing)


def test_a_module_is_public_by_its_path():
    """Every module outside ``beamtok/_src`` is a public namespace (or ``python -m beamtok``);
    no public namespace is defined under ``_src``."""
    outside = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in (ROOT / "beamtok").rglob("*.py")
        if "_src" not in path.relative_to(ROOT).parts
    }
    assert outside == {*PUBLIC_MODULES, "beamtok.__main__"}


def test_docs_and_examples_use_public_names_only():
    pages = [p for p in (ROOT / "docs").glob("*.md") if str(p.relative_to(ROOT)) not in INTERNALS_DOCS]
    sources = [ROOT / "README.md", *pages, *(ROOT / "examples").glob("*.py"), *(ROOT / "examples").glob("*.yaml")]
    private = re.compile(r"(?:from|import)\s+beamtok\._src")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sources
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert not found, "user docs and examples import private modules:\n" + "\n".join(found)


def test_importing_the_namespaces_imports_no_optional_dependency_and_leaves_logging_alone():
    code = (
        "import logging, sys\n"
        "import beamtok, beamtok.training, beamtok.beam, beamtok.extend, beamtok.cache\n"
        "heavy = [m for m in ('torch', 'apache_beam', 'jax', 'grain', 'accelerate', 'transformers') if m in sys.modules]\n"
        "print(heavy, len(logging.getLogger().handlers), len(logging.getLogger().filters))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split("\n")[0] == "[] 0 0"


def test_a_lazy_namespace_gives_its_names_and_refuses_others():
    import beamtok.beam
    import beamtok.training

    assert beamtok.training.DistributedLoader.__name__ == "DistributedLoader"
    assert sorted(dir(beamtok.training)) == sorted(beamtok.training.__all__)
    assert beamtok.beam.BuildCache.__name__ == "BuildCache"
    try:
        beamtok.training.NoSuchLoader  # noqa: B018
    except AttributeError as error:
        assert "beamtok.training" in str(error) and "NoSuchLoader" in str(error)
    else:
        raise AssertionError("an unknown name was given")

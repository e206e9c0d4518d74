"""Docs that cannot go stale: every module path (``beamtok/_src/stream/node.py``,
``cache/read/reader.py``, ``split.py``) and every dotted name (``beamtok.training.DistributedLoader``)
named in the docs, the README, the examples and the package's own docstrings and comments
exists today."""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Files of other projects the docs name (Megatron's tools, a user's setup.py): not ours to find.
FOREIGN_FILES = {
    "preprocess_data.py",
    "tools/preprocess_data.py",
    "pretrain_gpt.py",
    "setup.py",
    "FILE.py",
    "my_configs.py",
    "optimize.py",  # a script a benchmark writes
}
# Strings that look like dotted names but are format tags written into checkpoints.
FORMAT_TAGS = {"beamtok.rank_states"}
DOTTED = re.compile(r"(?<![\w./-])beamtok(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./:-])((?:[\w.-]+/)*[\w-]+\.py)\b")


def tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def texts() -> list[Path]:
    """What a reader reads: the docs, the README, the examples and the package's sources."""
    return [
        ROOT / name
        for name in tracked()
        if (
            name.startswith(("docs/", "beamtok/", "examples/", "pipelines/", "benchmarks/"))
            and name.endswith((".md", ".py"))
        )
        or name in ("README.md", "Makefile", "Dockerfile", "pyproject.toml")
    ]


def name_exists(name: str) -> bool:
    """Whether a dotted name is a module, or an attribute reached from the longest module prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def path_exists(path: str, files: set[str], basenames: set[str]) -> bool:
    if "/" not in path:
        return path in basenames or path in FOREIGN_FILES
    path = path.removeprefix("./")
    return path in FOREIGN_FILES or any(
        candidate in files for candidate in (path, f"beamtok/_src/{path}", f"beamtok/{path}", f"tests/{path}")
    )


def stale_references() -> list[str]:
    files = set(tracked())
    basenames = {Path(f).name for f in files}
    stale = []
    for source in texts():
        text = source.read_text(encoding="utf-8")
        where = source.relative_to(ROOT)
        for match in DOTTED.finditer(text):
            name = match.group(0).rstrip(".")
            if name not in FORMAT_TAGS and not name_exists(name):
                stale.append(f"{where}: {name}")
        for match in PATH.finditer(text):
            if not path_exists(match.group(1), files, basenames):
                stale.append(f"{where}: {match.group(1)}")
    return stale


def test_every_module_and_name_the_docs_and_docstrings_mention_exists():
    stale = stale_references()
    assert not stale, "named in the docs or a docstring, but not in the package:\n" + "\n".join(stale)


def test_a_renamed_module_is_caught(tmp_path, monkeypatch):
    """The check sees a path and a dotted name that do not exist (as a rename leaves them)."""
    files = set(tracked())
    basenames = {Path(f).name for f in files}
    assert path_exists("cache/read/reader.py", files, basenames)
    assert not path_exists("cache/reader.py", files, basenames)
    assert not path_exists("mix_base.py", files, basenames)
    assert name_exists("beamtok.training.DistributedLoader")
    assert not name_exists("beamtok.distributed.torch_loader")
    assert not name_exists("beamtok._src.stream.node.NoSuchNode")


def test_no_docstring_or_comment_is_dated():
    """A date in the package's sources reads as a commit message and goes stale; when something
    changed belongs to the history, the measurements to docs/performance.md."""
    dated = re.compile(r"\b20\d\d-[01]\d(-[0-3]\d)?\b")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "beamtok").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if dated.search(line)
    ]
    assert not found, "\n".join(found)


# a figure with a unit of time, or a speed-up, as measurements are written in prose
TIMING = re.compile(
    r"~?\b\d+(\.\d+)?\s?(ns|us|µs|ms)\b"  # 3.8 ns, ~1.5 us, 9.5 ms
    r"|~\d+(\.\d+)?\s?s\b"  # ~0.4 s
    r"|\b\d+(\.\d+)?\s?s (of CPU|a worker|a form|each|of start-up)\b"  # 2 s of CPU
    r"|~?\b\d+(\.\d+)?x (faster|slower|``?tokenizers)"  # 4x faster, ~4x ``tokenizers``
)


def timings_in_sources() -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "beamtok").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TIMING.search(line)
    ]


def test_no_docstring_or_comment_holds_a_timing():
    """Figures go stale in a docstring: the machine, the corpus and the code they were measured
    on change under them. docs/performance.md holds them, each with its benchmark."""
    found = timings_in_sources()
    assert not found, "\n".join(found)


def test_the_timing_pattern_catches_figures_as_they_were_written():
    for line in ("at ~11 ns a token here", "~0.4 s the launcher would wait", "1-2 s of CPU here",
                 "9.5 ms against 1.8 ms", "(4x faster than the regex)", "~4x ``tokenizers`` on prose"):  # fmt: skip
        assert TIMING.search(line), line
    for line in ("a line every 10 s and one at the end", "waited on for 5 s.", "max_tokens // bucket"):
        assert not TIMING.search(line), line

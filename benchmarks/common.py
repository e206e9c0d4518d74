"""Shared by the benchmarks: shards of the shipped real text (no downloads), and timing.

The shipped Shakespeare and Python-docs documents are written in order, round after round,
until the shard reaches the wanted size; every document is real English text.
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zstandard

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "data" / "corpus"
WORK = Path(__file__).resolve().parent / "work"


def shipped_documents() -> list[str]:
    docs: list[str] = []
    for path in sorted(CORPUS.glob("*.jsonl*")):
        if path.suffix == ".gz":
            raw = gzip.decompress(path.read_bytes())
        elif path.suffix == ".zst":
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes())
        else:
            raw = path.read_bytes()
        docs.extend(json.loads(line)["text"] for line in raw.splitlines() if line.strip())
    return docs


def build_jsonl(name: str, min_bytes: int, *, gzip_too: bool = False) -> Path:
    """Write WORK/name.jsonl of at least ``min_bytes`` (reused if already there)."""
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"{name}.jsonl"
    if not path.exists() or path.stat().st_size < min_bytes:
        docs = shipped_documents()
        size = 0
        with open(path, "wb") as f:
            while size < min_bytes:
                for text in docs:
                    line = (json.dumps({"text": text}, ensure_ascii=False) + "\n").encode()
                    f.write(line)
                    size += len(line)
                    if size >= min_bytes:
                        break
    if gzip_too:
        gz = path.with_suffix(".jsonl.gz")
        if not gz.exists() or gz.stat().st_mtime < path.stat().st_mtime:
            gz.write_bytes(gzip.compress(path.read_bytes(), compresslevel=6, mtime=0))
    return path


def code_documents() -> list[str]:
    """Source code and technical documentation every Linux machine with Python has, built at
    benchmark time (never committed): the standard library's own ``.py`` files (PSF licence)
    and the package documentation under /usr/share/doc (changelogs, READMEs, copyright files;
    gzip ones decompressed), each file one document, taken in turn from the two lists."""
    import itertools

    code, docs = stdlib_sources(), package_docs()
    return [d for pair in itertools.zip_longest(code, docs) for d in pair if d is not None]


def stdlib_sources() -> list[str]:
    """The standard library's own ``.py`` files, each one document (tests and installed packages left out)."""
    import sysconfig

    code: list[str] = []
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts or "tests" in path.parts:
            continue  # installed packages are not the standard library; its tests repeat one shape
        try:
            code.append(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return code


def package_docs() -> list[str]:
    """The text files under /usr/share/doc, each one document: mostly short (copyright files,
    READMEs), some long (changelogs), as a web crawl's pages are."""
    docs: list[str] = []
    for path in sorted(Path("/usr/share/doc").rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
            continue
        if text.strip():
            docs.append(text)
    return docs


def sampled_package_docs() -> list[str]:
    """The package documentation in a seeded random order, so a prefix is a fair sample of it."""
    import random

    docs = package_docs()
    random.Random(0).shuffle(docs)
    return docs


CORPORA = {"prose": shipped_documents, "code": code_documents, "docs": sampled_package_docs}


def build_shards(name: str, mb: float, shards: int, corpus: str = "prose") -> list[str]:
    """``shards`` JSONL files of real text adding up to at least ``mb`` MB (reused when there):
    the shipped prose (``prose``), source code and technical docs (``code``), or the
    package documentation alone in a seeded random order (``docs``: many short documents)."""
    WORK.mkdir(parents=True, exist_ok=True)
    docs = CORPORA[corpus]()
    if corpus != "prose":
        name = f"{name}-{corpus}"
    target = int(mb * 1e6 / shards)
    paths = []
    i = 0
    for s in range(shards):
        # the size is in the name: a larger set built for another run is never taken for this one
        path = WORK / f"{name}-{mb:g}mb-{s:02d}.jsonl"
        paths.append(str(path))
        if path.exists() and path.stat().st_size >= target:
            continue
        size = 0
        with open(path, "w", encoding="utf-8") as f:
            while size < target:
                line = json.dumps({"text": docs[i % len(docs)]}, ensure_ascii=False) + "\n"
                f.write(line)
                size += len(line.encode())
                i += 1
    return paths


def median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


PROSE = "the shipped prose (data/corpus), repeated to the size asked for"


def measured(command: list[str], what: str, **options: Any) -> dict[str, Any]:
    """Run ``command`` (a measurement in an interpreter of its own) and return the JSON object
    on the last line it prints; exit naming ``what``, with the end of its standard error, if
    it fails. ``options`` go to ``subprocess.run`` (``cwd``, ``env``)."""
    proc = subprocess.run(command, capture_output=True, text=True, **options)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def command_line() -> str:
    """How this benchmark was run, as a command from the repository's root."""
    return " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])


def machine_line() -> str:
    """The machine a result was measured on, in one line: processor, cores, system, Python."""
    import platform

    system = f"{platform.system()} {platform.release()}"
    return f"{platform.machine()}, {os.cpu_count()} cores, {system}, python {platform.python_version()}"


def write_results(name: str, results: dict[str, Any], corpus: str = PROSE) -> None:
    """Write ``results`` as benchmarks/results/NAME (indented JSON), with the date, the
    command, the machine's core count and the corpus first (a script's own values win)."""
    stamped: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": command_line(),
        "cores": os.cpu_count(),
        "corpus": corpus,
    }
    stamped.update(results)
    directory = Path(__file__).resolve().parent / "results"
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(json.dumps(stamped, indent=2) + "\n")


def peak_rss() -> int:
    """This process's peak resident memory in bytes: VmHWM, which starts afresh at exec.
    (``ru_maxrss`` does not: Linux carries the parent's high-water mark across fork and exec,
    so a measuring process started by a large parent reported the parent's size.)"""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakTreeMemory:
    """Peak memory of this process and every process below it (tokenization workers), sampled
    on a thread: the sum of their proportional set sizes (PSS: a page shared by forked
    processes counts once in total), read from ``/proc/PID/smaps_rollup`` (Linux)."""

    def __init__(self, interval: float = 0.05) -> None:
        import os
        import threading

        self.interval = interval
        self.peak_mb = 0.0
        self.processes = 1
        self._root = os.getpid()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakTreeMemory:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        pids = _descendants(self._root)
        total = 0.0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            total += int(line.split()[1]) / 1024
                            break
            except OSError:
                pass  # the process ended between the listing and the read
        self.peak_mb = max(self.peak_mb, total)
        self.processes = max(self.processes, len(pids))


def _descendants(root: int) -> list[int]:
    import os

    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found

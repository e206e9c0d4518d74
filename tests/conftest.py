"""Shared fixtures: the shipped GPT-2 tokenizer, the shipped corpus, small real-text shards."""

from __future__ import annotations

import contextlib
import functools
import gzip
import importlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

from slow_selection import SLOW_MODULES, SLOW_TESTS, leaves_out_slow

ROOT = Path(__file__).resolve().parent.parent
# one OpenMP thread per process (torch reads this at import, and every subprocess inherits it):
# the suite already runs a process per core, and OpenMP threads that spin-wait for a core
# another worker holds doubled the CPU of the tests that train a model
os.environ.setdefault("OMP_NUM_THREADS", "1")
# and one Rayon thread (tokenizers' batch encoding, kitoken): a second thread only contends
# with the other worker's process, and its hand-offs cost ~10% more CPU in the tests that check
# engines against tokenizers
os.environ.setdefault("RAYON_NUM_THREADS", "1")
# engines exact for a file are taken without the set-up race against tokenizers (engine_timing):
# which one wins depends on the machine's load, and the tests check ids and choices, not speed
# (tests/engines/test_engine_race.py turns it back on)
os.environ.setdefault("BEAMTOK_ENGINE_RACE", "0")
# and every engine runs its load checks, none skipped for a pass an earlier run remembered
# (engine_checks; tests/engines/test_passed_checks.py turns it back on)
os.environ.setdefault("BEAMTOK_CHECKS_DIR", "off")
# glibc hands every allocation above its mmap threshold (32 MB at most, by default) fresh pages
# from the kernel and returns them on free: the tiny models' logits over GPT-2's 50,257 tokens
# (25-50 MB a step) page-faulted in and out at every step, a third of the training tests' CPU
# in system time. Read when a process starts, so it reaches the xdist workers (started after
# this file is loaded) and every subprocess; other C libraries ignore it.
os.environ.setdefault("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=536870912")
# compiled bytecode kept, whatever the environment says (PYTHONDONTWRITEBYTECODE): hundreds of
# subprocesses (CLI runs, Beam workers, torchrun ranks) import beamtok, and each would compile
# it again, as each xdist worker would rewrite the test modules' asserts again
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # a slow module is not imported when -m leaves it out: each xdist worker otherwise imports
    # Megatron-Core, Lightning, dask and grain (~13 s of CPU apiece) for tests it will not run
    if collection_path.suffix == ".py" and collection_path.stem in SLOW_MODULES:
        if leaves_out_slow(config.getoption("markexpr", "") or ""):
            return True
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    # what collection imported (torch, Beam, transformers, the test modules) lives for the whole
    # run: frozen out of the collector, each full collection no longer walks it (a third of the
    # workers' collector time in make test-fast)
    import gc

    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = SLOW_MODULES - {path.stem for path in Path(__file__).parent.rglob("test_*.py")}
    if missing:  # a renamed module would silently join make test-fast
        raise pytest.UsageError(f"tests/slow_selection.py SLOW_MODULES names no test file: {sorted(missing)}")
    modules = {item.module.__name__: item.module for item in items if item.module is not None}
    unknown = {
        name
        for name in SLOW_TESTS
        if name.partition("::")[0] in modules and not hasattr(modules[name.partition("::")[0]], name.partition("::")[2])
    }
    if unknown:  # a renamed test would silently join make test-fast
        raise pytest.UsageError(f"tests/slow_selection.py SLOW_TESTS names no test: {sorted(unknown)}")
    for item in items:
        if item.module is None:
            continue
        if item.module.__name__ in SLOW_MODULES or f"{item.module.__name__}::{item.originalname}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    # whole jobs first: on two workers, a long job started last leaves the other worker idle at the end
    items.sort(key=lambda item: not item.get_closest_marker("slow"))


TOKENIZER_DIR = ROOT / "data" / "tokenizers" / "gpt2"
# tokenizers loaded through transformers are kept per machine, as users' are under ~/.cache
# (beamtok._src.transforms.loaded_tokenizers); the suite keeps its own, which its processes inherit
os.environ.setdefault("BEAMTOK_TOKENIZER_CACHE", str(ROOT / "build" / "test-tokenizers"))
CORPUS = ROOT / "data" / "corpus"


@pytest.fixture(scope="session")
def tokenizer_dir() -> str:
    return str(TOKENIZER_DIR)


@pytest.fixture(scope="session")
def gpt2() -> Any:
    from beamtok import load_tokenizer

    return load_tokenizer(str(TOKENIZER_DIR))


def real_paragraphs(count: int, *, start: int = 0) -> list[str]:
    """Paragraphs of the shipped Shakespeare text, in order: real text of varied length."""
    out: list[str] = []
    with open(CORPUS / "shakespeare-00.jsonl", encoding="utf-8") as f:
        for line in f:
            for para in json.loads(line)["text"].split("\n\n"):
                para = para.strip()
                if para:
                    out.append(para)
                if len(out) >= start + count:
                    return out[start:]
    return out[start:]


BUILT_ONCE = ROOT / "build" / "test-built"


def corpus_texts() -> list[str]:
    """The shipped JSONL documents, in file order (what the family tokenizers train on)."""
    return [
        json.loads(line)["text"]
        for path in sorted(CORPUS.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def built_once(name: str, key: Any, build: Callable[[Path], None]) -> Path:
    """The directory ``build`` fills, made once per machine rather than once per test module
    and xdist worker: kept under build/ by ``name`` and a hash of ``key`` (everything the
    result depends on: inputs, the code that makes it, library versions), made by one worker
    while the others wait on a file lock, and moved into place whole."""
    import fcntl
    import hashlib
    import shutil
    import tempfile

    digest = hashlib.sha256(json.dumps([name, key], default=str).encode()).hexdigest()[:16]
    target = BUILT_ONCE / f"{name}-{digest}"
    if (target / "tokenizer.json").exists():
        return target
    BUILT_ONCE.mkdir(parents=True, exist_ok=True)
    with open(BUILT_ONCE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "tokenizer.json").exists():
            scratch = Path(tempfile.mkdtemp(dir=BUILT_ONCE))
            build(scratch)
            shutil.rmtree(target, ignore_errors=True)
            os.replace(scratch, target)
    return target


def trained_family(kind: str, vocab_size: int = 6000) -> Path:
    """``beamtok.testing.family_tokenizer(kind)`` trained on the shipped corpus, once per
    machine (:func:`built_once`, keyed by the kind, the size, the corpus, the training code and
    the ``tokenizers`` version)."""
    import inspect

    import tokenizers

    from beamtok.testing import family_tokenizer

    texts = corpus_texts()
    key = [vocab_size, tokenizers.__version__, inspect.getsource(family_tokenizer), texts]
    return built_once(kind, key, lambda directory: family_tokenizer(kind, texts, directory, vocab_size=vocab_size))


@functools.cache  # called for every job and reference stream: read the corpus and hash it once
def small_vocab_tokenizer() -> str:
    """A tokenizer of 6,000 tokens (``trained_family("byte-level")``) for the jobs that
    train a model under torchrun, accelerate and JAX: what they prove (rows, states and
    checkpoints across processes) does not depend on the vocabulary, and a model's output
    layer over GPT-2's 50,257 tokens was most of each of their steps. GPT-2's kind, so each
    rank builds kitoken (0.4 s of CPU) where a SentencePiece-style BPE's compiled engine loads
    numba first (1.6 s): the jobs start ~60 such processes."""
    return str(trained_family("byte-level"))


def assert_same_ids(
    tok: Any, texts: list[str], where: str, reference: Any = None, special_every: int = 1, encoded: Any = None
) -> None:
    """``tok``'s fast path gives the ids of ``tokenizers`` (``reference``, else ``tok``'s own
    backend) on every text, with and without special tokens; the message names the first text
    that differs. ``tokenizers`` encodes each text once: its ids with special tokens are its
    own post-processor applied to that encoding (what its ``encode`` does when asked for them).
    ``special_every``: with special tokens, only every so many texts (what the post-processor
    puts around the ids does not depend on the text: a sample shows it is applied).
    ``encoded``: the reference's encodings of ``texts`` without special tokens, where the
    caller checks several engines against one encoding."""
    reference = tok.backend if reference is None else reference
    plain = reference.encode_batch_fast(list(texts), add_special_tokens=False) if encoded is None else encoded
    sampled = range(0, len(texts), special_every)
    references = {
        False: (range(len(texts)), [e.ids for e in plain]),
        True: (sampled, [reference.post_process(plain[i], None, True).ids for i in sampled]),
    }
    for special, (which, want) in references.items():
        fast = tok.encode_batch([texts[i] for i in which], add_special_tokens=special, engine="exact")
        mismatched = [i for i, a, b in zip(which, fast, want, strict=True) if a.tolist() != b]
        assert not mismatched, (
            f"{where} (add_special_tokens={special}): {len(mismatched)} differ, first {texts[mismatched[0]][:80]!r}"
        )


def on_threads(work: Callable[[int], None], count: int) -> None:
    """``work(0)`` .. ``work(count - 1)`` each on a thread of its own, all at once; returns when
    all have ended (what they found wrong they record for the caller to assert)."""
    import threading

    threads = [threading.Thread(target=work, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def wrong_on_threads(
    encode: Callable[[Any], list[Any]], batches: list[Any], want: list[list[list[int]]], rounds: int = 20
) -> list[int]:
    """Encode batch ``k`` ``rounds`` times on thread ``k``, all threads at once; the batches
    whose ids ever differed from ``want[k]``."""
    wrong: list[int] = []

    def encode_often(k: int) -> None:
        for _ in range(rounds):
            if [ids.tolist() for ids in encode(batches[k])] != want[k]:
                wrong.append(k)
                return

    on_threads(encode_often, len(batches))
    return wrong


def inspect_state(state: dict[str, Any], directory: Path) -> str:
    """What ``beamtok inspect`` prints, in a fresh process, for ``state`` saved to a file in
    ``directory`` (it must succeed)."""
    path = directory / "state.json"
    path.write_text(json.dumps(state))
    shown = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "inspect", str(path)], capture_output=True, text=True, cwd=ROOT
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


@pytest.fixture(scope="session")
def paragraphs() -> Callable[..., list[str]]:
    return real_paragraphs


def write_jsonl(path: Path, records: list[Any], compression: str | None = None) -> Path:
    """Write records (dicts, or raw strings written as lines verbatim) as JSONL."""
    lines = [(r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records]
    data = "".join(lines).encode("utf-8")
    if compression == "gz":
        data = gzip.compress(data, mtime=0)
    elif compression == "zst":
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def paragraph_files(root: Path, files: int, per_file: int) -> str:
    """``files`` JSONL files of ``per_file`` real paragraphs each under ``root``; their brace pattern."""
    paragraphs = real_paragraphs(files * per_file)
    for i in range(files):
        write_jsonl(root / f"part-{i}.jsonl", [{"text": p} for p in paragraphs[i * per_file : (i + 1) * per_file]])
    return str(root / f"part-{{0..{files - 1}}}.jsonl")


@pytest.fixture
def make_shards(tmp_path: Path) -> Callable[..., list[str]]:
    """Write ``n`` small JSONL shards of real paragraphs; returns their paths."""

    def make(n: int, docs_per_shard: int = 12, compression: str | None = None, start: int = 0) -> list[str]:
        paras = real_paragraphs(n * docs_per_shard, start=start)
        suffix = ".jsonl" + (f".{compression}" if compression else "")
        paths = []
        for i in range(n):
            docs = [{"text": t} for t in paras[i * docs_per_shard : (i + 1) * docs_per_shard]]
            paths.append(str(write_jsonl(tmp_path / f"part-{i:02d}{suffix}", docs, compression)))
        return paths

    return make


@pytest.fixture
def s3_bucket(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A bucket named ``corpus`` on a real S3-compatible server (moto) on 127.0.0.1; the
    AWS environment points every client at it."""
    import boto3
    from moto import server as moto_server

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket="corpus")
    yield client
    server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def modules_blocked(*names: str) -> Iterator[None]:
    """Importing ``names`` fails inside the block (as where they are not installed); only
    those entries of ``sys.modules`` are put back after it. ``mock.patch.dict(sys.modules)``
    puts the whole dict back, dropping what the block imported (numba's registries on a first
    compile, numpy.fft): imported again later, they fail ("duplicate registration", "cannot
    load module more than once per process"), as ``make test-fast`` did."""
    with pytest.MonkeyPatch.context() as patch:
        for name in names:
            patch.setitem(sys.modules, name, None)
        yield


@contextlib.contextmanager
def portable_job_service() -> Iterator[str]:
    """Beam's local job service in its own process; yields its endpoint for PortableRunner."""
    port = free_port()
    service = subprocess.Popen(
        [sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main", f"--port={port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.3)
        yield f"localhost:{port}"
    finally:
        service.terminate()
        service.wait(30)


@pytest.fixture
def ctrl_c_taken() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt in this process for the test, whatever the runner was
    started with (a shell starts background jobs with SIGINT ignored), restored after: so a
    test can tell SIGINT ignored by beamtok from SIGINT ignored by the shell."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def run_torchrun(
    nproc: int, script: str, *args: str, launcher: tuple[str, ...] = (), timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m torch.distributed.run --standalone`` of ``script`` on ``nproc`` ranks (one
    OpenMP thread each), from the repository root in a process group of its own; the test
    fails, with the job's output, unless every rank exits 0. ``launcher``: more torchrun flags."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    done = run_group(
        [*command, *launcher, script, *args],
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return done


def run_group(command: list[str], *, timeout: float, **options: Any) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a process group of its own, as text; on timeout the whole group is
    killed (a launcher's workers and their DataLoader workers too) and the test fails."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **options
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        out, err = process.communicate()
        pytest.fail(f"{' '.join(command)} ran over {timeout} s:\n{out[-2000:]}\n{err[-4000:]}", pytrace=False)
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def shakespeare_copies(root: Path, count: int) -> list[str]:
    """``count`` JSONL files of 4 MB each (the four shipped Shakespeare files, concatenated):
    a build of a few seconds, one shard file a second."""
    text = b"".join((CORPUS / f"shakespeare-0{i}.jsonl").read_bytes() for i in range(4))
    paths = []
    for i in range(count):
        path = root / f"part-{i:02d}.jsonl"
        path.write_bytes(text)
        paths.append(str(path))
    return paths


def cache_without_beam(ds: Any, directory: str, **layout: Any) -> Any:
    """A finished cache of ``ds`` (per-shard stages only) written by cache_as_you_go, no Beam
    run: a shard whose writer fell behind the stream is written on a later pass."""
    from beamtok import Dataset
    from beamtok._src.cache.build.as_you_go import QUEUE_ITEMS

    for _ in range(4):
        with ds.cache_as_you_go(directory, **layout).iter() as writing:
            backend = writing.source.backend
            for _ in writing:
                # a training step leaves the writer thread time; a bare loop holds the GIL
                # and outruns it (the shard is then given up: by design, never waited for)
                while any(w.items.qsize() > QUEUE_ITEMS // 2 for w in backend.writers if w.is_alive()):
                    time.sleep(0.001)
            writing.source.backend.wait(timeout=60)  # the last shard's file lands after its last example
        if (Path(directory) / "manifest.json").exists():
            return Dataset.from_cache(directory)
    raise AssertionError(f"{directory}: no manifest after 4 passes")


if os.environ.get("CI"):
    # CI installs every extra (make setup): a missing one fails the run instead of skipping suites
    def _required(modname: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return importlib.import_module(modname)
        except ImportError as error:
            pytest.fail(f"{modname} is missing on CI, where make setup installs every extra: {error}", pytrace=False)

    pytest.importorskip = _required

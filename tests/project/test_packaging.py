"""What the worker image and --setup_file ship: versions that match, files that exist, an
install that imports. (No Docker engine runs here, so the image itself is not built.)"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

beam = pytest.importorskip("apache_beam")
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_worker_image_matches_the_launcher_beam_and_python():
    (image,) = re.findall(r"^FROM (\S+)", DOCKERFILE, re.M)
    assert image == f"apache/beam_python{sys.version_info.major}.{sys.version_info.minor}_sdk:{beam.__version__}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'beam = ["apache-beam=={beam.__version__}"' in pyproject
    assert f'dataflow = ["apache-beam[gcp]=={beam.__version__}"' in pyproject
    assert not re.search(r"^(ENTRYPOINT|CMD)\b", DOCKERFILE, re.M)  # the base image's Beam boot must stay


def test_dockerfile_copies_what_exists_and_its_check_runs():
    for line in re.findall(r"^COPY (.+)$", DOCKERFILE, re.M):
        for source in line.split()[:-1]:
            assert (ROOT / source).exists(), source
    check = re.search(r'python -c "(.+)"', DOCKERFILE).group(1)
    subprocess.run([sys.executable, "-c", check], check=True, cwd=ROOT)


def test_setup_file_package_carries_the_pipeline(tmp_path):
    """Dataflow installs the package --setup_file builds; it must hold beamtok with its Beam
    transforms, and not the top-level ``pipelines`` programs (a generic name that would clash)."""
    cmd = f"{shlex.quote(sys.executable)} -m pip wheel --no-deps --no-build-isolation -q -w {tmp_path} ."
    subprocess.run(cmd, shell=True, check=True, cwd=ROOT, capture_output=True)
    (wheel,) = tmp_path.glob("beamtok-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "beamtok/_src/beam/build.py",
        "beamtok/_src/beam/run.py",
        "beamtok/_src/shards/processor.py",
        "beamtok/_src/cli/__init__.py",
        "beamtok/py.typed",
    ):
        assert required in names
    assert not any(n.startswith("pipelines/") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "beamtok = beamtok._src.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    for demo in (
        "demo/gpt2/vocab.json",
        "demo/gpt2/merges.txt",
        "demo/gpt2/tokenizer_config.json",
        "demo/corpus/shakespeare-04.jsonl.gz",
    ):
        assert f"beamtok/{demo}" in names
    # `beamtok demo` from the installed files alone, in a directory with no data/ of its own
    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(installed)}
    demo = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "demo", "--batches", "1"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
    )
    assert demo.returncode == 0, demo.stderr
    assert (
        "resumed stream identical: True" in demo.stdout and str(installed / "beamtok" / "demo" / "gpt2") in demo.stdout
    )
    broken = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "demo", "--data", str(elsewhere / "none.jsonl")],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
    )
    assert broken.returncode == 2 and "none.jsonl: file not found" in broken.stderr


def test_pipeline_program_builds_a_cache(tmp_path):
    """pipelines/build_cache.py runs as a Beam main program would: beamtok options plus Beam
    options, from any directory, without being installed."""
    out = tmp_path / "cache"
    cmd = [
        sys.executable,
        str(ROOT / "pipelines" / "build_cache.py"),
        str(ROOT / "data" / "corpus" / "shakespeare-00.jsonl"),
        "--output", str(out),
        "--tokenizer", str(ROOT / "data" / "tokenizers" / "gpt2"),
        "--seq-len", "256",
        "--direct_running_mode=in_memory",
        "--quiet",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (out / "manifest.json").exists() and "shards" in proc.stdout

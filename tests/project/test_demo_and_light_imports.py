"""The CLI demo, one-line user errors, and imports that need neither Beam nor torch."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from beamtok._src.cli import main

from conftest import ROOT


def test_demo_prints_decoded_packed_sequences_and_resumes(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["demo", "--batches", "2", "--seq-len", "32"])
    assert result.exit_code == 0, result.output
    assert result.output.count("--- batch") == 4
    assert "resumed stream identical: True" in result.output
    assert "KING" in result.output or "Enter" in result.output or "ACT" in result.output


def test_user_error_is_one_line_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "demo", "--data", str(tmp_path / "missing.jsonl")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"beamtok: error: {tmp_path / 'missing.jsonl'}: file not found"
    assert "Traceback" not in proc.stderr


def test_online_iterator_runs_without_beam_or_torch():
    """Simulate an install without the beam and torch extras by making their imports fail."""
    code = (
        "import sys\n"
        "sys.modules.update(torch=None, apache_beam=None)  # importing either now fails\n"
        "import beamtok\n"
        "from beamtok import Dataset\n"
        "ds = Dataset.from_sequence(['a b c', 'd e']).tokenize('data/tokenizers/gpt2').concat_chunk(4).batch(1)\n"
        "list(ds)\n"
        "assert sys.modules['torch'] is None and sys.modules['apache_beam'] is None\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_import_beamtok_imports_neither_beam_nor_pyarrow_filesystems():
    code = (
        "import sys\n"
        "import beamtok\n"
        "from beamtok import Dataset\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('apache_beam', 'torch') or m.startswith('pyarrow.fs') or m == 'pyarrow._fs']\n"
        "assert not loaded, loaded\n"
        "ds = Dataset.from_files('data/corpus/shakespeare-00.jsonl').tokenize('data/tokenizers/gpt2').concat_chunk(64).batch(2)\n"
        "next(iter(ds))\n"
        "assert 'pyarrow' not in sys.modules and 'apache_beam' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_reading_a_cache_imports_neither_pandas_nor_beam(tmp_path):
    """pyarrow's to_numpy imports pandas (0.2 s at a reader's first row); the reader avoids it."""
    from beamtok import Dataset

    Dataset.from_files(str(ROOT / "data/corpus/shakespeare-00.jsonl")).tokenize(
        str(ROOT / "data/tokenizers/gpt2")
    ).concat_chunk(64).cache(str(tmp_path / "c"), progress=False, row_group_rows=100)
    code = (
        "import sys\n"
        "from beamtok import Dataset\n"
        f"rows = list(Dataset.from_cache({str(tmp_path / 'c')!r}).batch(4))\n"
        "assert len(rows) > 100\n"
        "loaded = [m for m in ('pandas', 'apache_beam', 'transformers') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)

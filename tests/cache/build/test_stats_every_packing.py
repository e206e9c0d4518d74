"""``beamtok stats`` and ``beamtok head`` describe a cache of every packing mode rightly: its
document figures are the input files' own (count and lengths, before packing), whether rows
keep documents whole, cut them at token offsets, or reorder and cut them inside a packing
window; ``head`` never calls a window packer's row number a token offset."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from beamtok import Dataset
from beamtok._src.cli import main
from beamtok._src.cli.data_stats import cache_stats, files_stats, percentiles

from conftest import CORPUS, ROOT, TOKENIZER_DIR, cache_without_beam

pytest.importorskip("apache_beam")
TOKENIZER = str(TOKENIZER_DIR)
PROSE = str(CORPUS / "shakespeare-00.jsonl")  # 29 documents, the longest 30,581 GPT-2 tokens
SFT = str(ROOT / "data" / "sft" / "shakespeare-dialogue.jsonl")


def pretraining() -> Dataset:
    return Dataset.from_files([PROSE]).tokenize(TOKENIZER).ensure_bos_eos()


def sft() -> Dataset:
    return Dataset.from_files([SFT]).tokenize_sft(TOKENIZER, max_length=200)


MODES: dict[str, tuple[Callable[[], Dataset], Callable[[Dataset], Dataset]]] = {
    "concat_chunk": (pretraining, lambda ds: ds.concat_chunk(2048)),
    "concat_chunk_drop": (pretraining, lambda ds: ds.concat_chunk(2048, remainder="drop")),
    "pad": (pretraining, lambda ds: ds.pad(2048)),
    "sliding_window": (pretraining, lambda ds: ds.sliding_window(2048, stride=1024)),
    "pack_documents": (pretraining, lambda ds: ds.pack_documents(2048)),
    "pack_documents_truncate": (pretraining, lambda ds: ds.pack_documents(2048, long_docs="truncate", window=8)),
    "pack_power_of_two": (pretraining, lambda ds: ds.pack_power_of_two(2048)),
    "none": (pretraining, lambda ds: ds),
    "pack_examples_greedy": (sft, lambda ds: ds.pack_examples(256)),
    "pack_examples_first_fit": (sft, lambda ds: ds.pack_examples(256, method="first_fit", window=16)),
}


@pytest.fixture(scope="module")
def truth() -> dict[str, list[int]]:
    """Every tokenized document's length, read whole, one a row."""
    return {name: [len(e["input_ids"]) for e in make()] for name, make in (("pretraining", pretraining), ("sft", sft))}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_document_figures_are_the_input_files(mode, truth, tmp_path):
    make, pack = MODES[mode]
    lengths = truth["sft" if make is sft else "pretraining"]
    out = tmp_path / "cache"
    pack(make()).cache(str(out), progress=False)
    summary, _ = cache_stats(str(out))
    want = percentiles(lengths)
    assert summary["read"]["document_tokens"] == want, mode
    assert summary["read"]["document_tokens_from"] == "documents"
    assert want is not None and want["count"] == len(lengths)
    files, _ = files_stats(pack(make()), documents=10_000)
    assert files["read"]["document_tokens"] == want, mode


def test_the_issue_case_through_the_command_line(tmp_path):
    """shakespeare-00 at 2048 by pack_documents: 29 documents, the longest 30,581 tokens, as the
    files say (it used to report 14, the longest 2,171)."""
    out = tmp_path / "cache"
    run = CliRunner().invoke(
        main,
        [
            "cache",
            PROSE,
            "-o",
            str(out),
            "--tokenizer",
            TOKENIZER,
            "--seq-len",
            "2048",
            "--pack",
            "pack_documents",
            "-q",
        ],
    )
    assert run.exit_code == 0, run.output
    cached = json.loads(CliRunner().invoke(main, ["stats", str(out), "--json"]).stdout)
    files = json.loads(CliRunner().invoke(main, ["stats", PROSE, "--tokenizer", TOKENIZER, "--json"]).stdout)
    assert cached["read"]["document_tokens"]["count"] == 29 == files["read"]["document_tokens"]["count"]
    assert cached["read"]["document_tokens"]["max"] == 30_581 == files["read"]["document_tokens"]["max"]
    assert cached["documents"]["read"] == 29
    text = CliRunner().invoke(main, ["stats", str(out)]).stdout
    assert "document length (tokens): min" in text and "30,581" in text


@pytest.mark.parametrize("mode", ["concat_chunk", "pack_documents"])  # packed in parallel and joined; packed whole
def test_a_split_build_records_the_same_lengths(mode, truth, tmp_path):
    out = tmp_path / "split"
    MODES[mode][1](pretraining()).cache(str(out), split_bytes=100_000, row_group_rows=4, progress=False)
    assert cache_stats(str(out))[0]["read"]["document_tokens"] == percentiles(truth["pretraining"])


def test_without_a_record_the_rows_are_read_by_the_modes_own_rules(truth, tmp_path):
    """A cache written as it streamed records no lengths: whole examples are whole (a window
    packer's row number is no token offset), offsets rebuild concat_chunk's documents."""
    examples = cache_without_beam(sft().pack_examples(256, method="first_fit", window=16), str(tmp_path / "sft"))
    assert examples is not None
    summary, _ = cache_stats(str(tmp_path / "sft"))
    assert summary["read"]["document_tokens_from"] == "rows"
    assert summary["read"]["document_tokens"] == percentiles(truth["sft"])
    cache_without_beam(pretraining().concat_chunk(2048), str(tmp_path / "concat"))
    assert cache_stats(str(tmp_path / "concat"))[0]["read"]["document_tokens"] == percentiles(truth["pretraining"])


@pytest.mark.parametrize("mode", ["pack_examples_first_fit", "pack_documents"])
def test_head_never_reads_a_window_row_number_as_a_token_offset(mode, tmp_path):
    make, pack = MODES[mode]
    out = tmp_path / "cache"
    pack(make()).cache(str(out), progress=False)
    run = CliRunner().invoke(main, ["head", str(out), "--no-shuffle", "--batches", "6", "--batch-size", "4", "--json"])
    assert run.exit_code == 0, run.output
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith('{"batch"')]
    assert any(r["token"] > 0 for r in rows)  # rows past a window's first: the case that was misread
    pieces = [p for r in rows for p in r["pieces"]]
    assert all(p["offset"] == 0 for p in pieces)
    if mode == "pack_examples_first_fit":
        assert all(p["starts_document"] is True for p in pieces)  # whole examples
    else:
        assert all(p["starts_document"] is None for p in pieces)  # a document, or a piece cut from one
    text = CliRunner().invoke(main, ["head", str(out), "--no-shuffle", "--batches", "6", "--batch-size", "4"]).stdout
    assert "continues a document" not in text


def test_head_on_concat_rows_still_names_the_offset(tmp_path):
    out = tmp_path / "cache"
    pretraining().concat_chunk(2048).cache(str(out), progress=False)
    run = CliRunner().invoke(main, ["head", str(out), "--no-shuffle", "--batches", "2", "--batch-size", "4", "--json"])
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith('{"batch"')]
    continued = [r for r in rows if r["token"] > 0]
    assert continued and all(
        r["pieces"][0]["offset"] == r["token"] and r["pieces"][0]["starts_document"] is False for r in continued
    )
    assert np.all([p["starts_document"] for r in rows for p in r["pieces"][1:]])


def test_records_hold_lengths_the_sidecar_reader_ignores(tmp_path):
    """The record's lengths are beside the entry: a re-run still reuses the shard."""
    out = tmp_path / "cache"
    pretraining().concat_chunk(2048).cache(str(out), progress=False)
    record = json.loads((Path(out) / "records" / "shard-00000.json").read_text())
    assert sum(record["document_tokens"]["counts"]) == 29
    stamp = (Path(out) / "shards" / "shard-00000.parquet").stat().st_mtime_ns
    (Path(out) / "manifest.json").unlink()
    pretraining().concat_chunk(2048).cache(str(out), progress=False)
    assert (Path(out) / "shards" / "shard-00000.parquet").stat().st_mtime_ns == stamp

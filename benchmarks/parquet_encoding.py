"""Cache size and read speed by the encoding of token ids: byte-stream-split (the default until
2026-11), plain with zstd (the default since), plain with snappy (``--parquet-compat``) and a
dictionary, on the prose and the code corpus.

Each form is a whole cache built in-process from the same JSONL; the rows are the same. Read
speed is measured twice: pyarrow decoding the ``input_ids`` column of every shard to one numpy
array, and beamtok streaming the cache in batches of 16. Rounds are paired: each round reads
every form once (in a rotating order), and a form's ratio is its rate over byte-stream-split's
in the same round; medians over rounds are reported.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from beamtok import Dataset
from beamtok._src.cache.format import schema

from common import ROOT, WORK, build_shards, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
BYTE_STREAM_SPLIT = {**schema.PARQUET_OPTIONS, "column_encoding": {"input_ids.list.element": "BYTE_STREAM_SPLIT"}}
DICTIONARY = {
    **schema.PARQUET_OPTIONS,
    "use_dictionary": [*schema.PARQUET_OPTIONS["use_dictionary"], "input_ids.list.element"],
}
# name: (options the writer takes as its default, parquet_compat)
FORMS: dict[str, tuple[dict[str, Any], bool]] = {
    "byte_stream_split+zstd": (BYTE_STREAM_SPLIT, False),
    "plain+zstd (default)": (schema.PARQUET_OPTIONS, False),
    "plain+snappy (--parquet-compat)": (schema.PARQUET_OPTIONS, True),
    "dictionary+zstd": (DICTIONARY, False),
}
BASE = "byte_stream_split+zstd"


def build(form: str, inputs: list[str], seq_len: int, directory: Path) -> None:
    options, compat = FORMS[form]
    shutil.rmtree(directory, ignore_errors=True)
    default = schema.PARQUET_OPTIONS
    schema.PARQUET_OPTIONS = options  # the in-process build's writer reads it at each file
    try:
        Dataset.from_files(inputs).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(seq_len).cache(
            str(directory), progress=False, parquet_compat=compat
        )
    finally:
        schema.PARQUET_OPTIONS = default


def decode_rate(files: list[str]) -> float:
    start = time.perf_counter()
    tokens = 0
    for f in files:
        tokens += len(pq.read_table(f, columns=["input_ids"]).column(0).combine_chunks().flatten().to_numpy())
    return tokens / (time.perf_counter() - start)


def stream_rate(directory: Path) -> float:
    start = time.perf_counter()
    tokens = sum(batch["input_ids"].size for batch in Dataset.from_cache(str(directory)).batch(16))
    return tokens / (time.perf_counter() - start)


def measure(corpus: str, mb: float, seq_len: int, rounds: int) -> dict[str, Any]:
    inputs = build_shards("parquet-encoding", mb, 4, corpus)
    directories = {form: WORK / f"parquet-encoding-{corpus}-{i}" for i, form in enumerate(FORMS)}
    for form, directory in directories.items():
        build(form, inputs, seq_len, directory)
    files = {form: sorted(str(p) for p in (d / "shards").glob("shard-*.parquet")) for form, d in directories.items()}
    tokens = sum(pq.ParquetFile(f).metadata.num_rows for f in files[BASE]) * seq_len
    decode: dict[str, list[float]] = {form: [] for form in FORMS}
    streamed: dict[str, list[float]] = {form: [] for form in FORMS}
    order = list(FORMS)
    for r in range(rounds):
        for form in order[r % len(order) :] + order[: r % len(order)]:
            decode[form].append(decode_rate(files[form]))
            streamed[form].append(stream_rate(directories[form]))
    result: dict[str, Any] = {"tokens": tokens, "forms": {}}
    for form in FORMS:
        size = sum(Path(f).stat().st_size for f in files[form])
        result["forms"][form] = {
            "bytes": size,
            "bytes_per_token": round(size / tokens, 4),
            "size_vs_byte_stream_split": round(size / sum(Path(f).stat().st_size for f in files[BASE]), 4),
            "decode_m_tokens_per_s": round(statistics.median(decode[form]) / 1e6, 1),
            "decode_vs_byte_stream_split": round(
                statistics.median(a / b for a, b in zip(decode[form], decode[BASE])), 3
            ),
            "stream_m_tokens_per_s": round(statistics.median(streamed[form]) / 1e6, 2),
            "stream_vs_byte_stream_split": round(
                statistics.median(a / b for a, b in zip(streamed[form], streamed[BASE])), 3
            ),
        }
    for directory in directories.values():
        shutil.rmtree(directory, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=40.0)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = {corpus: measure(corpus, args.mb, args.seq_len, args.rounds) for corpus in ("prose", "code")}
    for corpus, result in results.items():
        for form, figures in result["forms"].items():
            print(
                f"{corpus:5} {form:32} {figures['bytes_per_token']:.3f} B/token  decode {figures['decode_m_tokens_per_s']:7.1f} M/s ({figures['decode_vs_byte_stream_split']:.2f}x)  stream {figures['stream_m_tokens_per_s']:6.2f} M/s ({figures['stream_vs_byte_stream_split']:.2f}x)"
            )
    write_results(
        "parquet_encoding.json",
        {"seq_len": args.seq_len, "rounds": args.rounds, "baseline": BASE, "corpora": results},
        corpus=f"{args.mb:g} MB each of the shipped prose (repeated) and of source code and package docs (benchmarks/common.py), GPT-2 tokens",
    )


if __name__ == "__main__":
    main()

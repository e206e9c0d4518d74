"""Byte-level files whose split is spelled in each published way, on the engine ``engine="auto"``
takes, against raw ``tokenizers``, at one core pinned, each measurement a fresh process.

    python benchmarks/split_spellings.py [--kinds gpt2,cl100k-tiktoken-0.5,...] [--mb 4]

Kinds: ``gpt2`` as shipped; ``cl100k-tiktoken-0.5``, ``cl100k-today`` and ``llama3-form``:
cl100k's ranks written by ``transformers``' ``TikTokenConverter`` with tiktoken 0.5-0.8's,
tiktoken's current and Llama-3's split pattern; ``qwen2``: Qwen's ranks with Qwen2's split;
``o200k``: GPT-4o's ranks and split as ``ranks.tokenizer_json_from_ranks`` writes them, and
``o200k-converted`` as ``TikTokenConverter`` does; ``deepseek-v3-form``: cl100k's ranks with
DeepSeek-V3's pre-tokenizer, three splits in a row (``fast_path.tokenizer_dir``). Corpora, each cut to ``--mb`` megabytes of documents in a
seeded order: the shipped prose, source code and package documentation
(``common.code_documents``), and ``multilingual``, the test texts of chardet (Russian,
Bulgarian, Greek, Hebrew, Arabic, Turkish, Chinese, Japanese, Korean, Thai, central European
languages in their legacy encodings, decoded) where a copy is found on the machine
(``--multilingual DIR``; left out otherwise).

Each process loads the tokenizer (the set-up race off, so the engine is the one the file
checks take), encodes the first batch of 64 texts (set-up and first batch timed apart), then
encodes the rest once in batches of 64: text it has not seen, so a word cache fills as it
would on a first epoch. ``raw`` is ``tokenizers``' ``encode_batch_fast`` on one Rayon thread
in a process of its own. Beside the engine taken, the one that would be next where it is close:
the compiled byte-level engine for ``gpt2`` (whose ByteLevel split kitoken takes first) and
for o200k's files (which bpe-openai takes first), bpe-openai for ``cl100k-today``. Rounds alternate the sides; ratios are medians of per-round ratios.
By default each process finds what earlier ones kept on the machine (passed load checks,
the classes of characters learned: ``passed_checks``), as every process after a machine's
first does; ``--cold`` gives each process an empty ``$BEAMTOK_CHECKS_DIR``, as the first.
Writes benchmarks/results/split_spellings.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fast_path import tokenizer_dir

from common import code_documents, machine_line, shipped_documents, write_results

KINDS = [
    "gpt2",
    "cl100k-tiktoken-0.5",
    "cl100k-today",
    "llama3-form",
    "qwen2",
    "o200k",
    "o200k-converted",
    "deepseek-v3-form",
]
BESIDE = {
    "gpt2": "compiled byte-level BPE",
    "cl100k-today": "bpe-openai",
    "o200k": "compiled byte-level BPE",
    "o200k-converted": "compiled byte-level BPE",
}
CHARDET = "/usr/lib/google-cloud-sdk/platform/gsutil/third_party/chardet/tests"
BATCH = 64


def multilingual_documents(root: str) -> list[str]:
    """chardet's test files decoded by the encoding their folder names (UTF-16/32 and
    ASCII-only folders left out)."""
    documents = []
    for folder in sorted(os.listdir(root)):
        parts = folder.split("-")
        if parts[0] in ("UTF", "ascii", "utf") or not os.path.isdir(os.path.join(root, folder)):
            continue
        encoding = "-".join(parts[:3]) if folder.startswith("iso-8859") else folder
        if folder.startswith("windows-"):
            encoding = "cp" + parts[1]
        for name in sorted(os.listdir(os.path.join(root, folder))):
            try:
                documents.append(Path(root, folder, name).read_bytes().decode(encoding))
            except (UnicodeDecodeError, LookupError):
                continue
    return documents


def corpus(name: str, mb: float, multilingual: str) -> list[str]:
    documents = {
        "prose": shipped_documents,
        "code": code_documents,
        "multilingual": lambda: multilingual_documents(multilingual),
    }[name]()
    random.Random(7).shuffle(documents)
    out, size = [], 0
    for document in documents:
        for start in range(0, len(document), 4000):  # documents cut to pieces of a few KB, as records are
            out.append(document[start : start + 4000])
            size += len(out[-1].encode())
        if size >= mb * 1e6:
            break
    return out


def measure(kind: str, texts_file: str, side: str) -> dict[str, Any]:
    """In this process: set-up, first batch and the rest of ``texts_file`` on ``side``."""
    os.environ["BEAMTOK_ENGINE_RACE"] = "0"
    from beamtok import load_tokenizer

    texts = json.loads(Path(texts_file).read_text(encoding="utf-8"))
    start = time.perf_counter()
    tok = load_tokenizer(tokenizer_dir(kind))
    if side == "raw":
        backend = tok.backend

        def encode(batch: list[str]) -> Any:
            return backend.encode_batch_fast(batch, add_special_tokens=False)

        engine = "tokenizers"
    else:
        encoder = tok.exact_encoder() if side == "auto" else candidate(tok, side)
        engine = encoder.engine_name

        def encode(batch: list[str]) -> Any:
            return encoder.encode_batch(batch, False)

    set_up = time.perf_counter()
    encode(texts[:BATCH])
    first = time.perf_counter()
    tokens = 0
    for i in range(BATCH, len(texts), BATCH):
        tokens += sum(len(ids) for ids in encode(texts[i : i + BATCH]))
    end = time.perf_counter()
    return {
        "engine": engine,
        "set_up_s": set_up - start,
        "first_batch_s": first - set_up,
        "rest_s": end - first,
        "tokens": tokens,
    }


def candidate(tok: Any, name: str) -> Any:
    """The engine of the candidate ``name`` built for ``tok``'s file, as ``choose`` builds it."""
    from beamtok._src.engines.engine_choice import candidates_for
    from beamtok._src.engines.tokenizer_parts import TokenizerFile, read_spec

    serialized = tok.backend.to_str()
    file = TokenizerFile(serialized, tok.name, tok.backend, read_spec(serialized))
    family = tok.engine_choice.family
    return next(c for c in candidates_for(family, tok.backend) if c.name == name).build(file)


def run(kind: str, texts_file: str, side: str, cold: bool = False) -> dict[str, Any]:
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    if cold:  # nothing an earlier process kept: the load checks run, every character is learned
        env["BEAMTOK_CHECKS_DIR"] = tempfile.mkdtemp(prefix="beamtok-cold-")
    out = subprocess.run(
        [*pin, sys.executable, __file__, "--measure", kind, texts_file, side],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--corpora", default="prose,code,multilingual")
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--multilingual", default=CHARDET)
    parser.add_argument("--out", default="split_spellings.json")
    parser.add_argument(
        "--cold", action="store_true", help="each process without the load checks and classes kept on the machine"
    )
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return
    corpora = [c for c in args.corpora.split(",") if c != "multilingual" or os.path.isdir(args.multilingual)]
    work = Path(__file__).resolve().parent / "work" / "split_spellings"
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "machine": machine_line(),
        "pinned": bool(shutil.which("taskset")),
        "cold": args.cold,
        "corpora": {},
    }
    for name in corpora:
        texts = corpus(name, args.mb, args.multilingual)
        texts_file = work / f"{name}.json"
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
        rows: dict[str, Any] = {}
        for kind in args.kinds.split(","):
            rounds = []
            for _ in range(args.rounds):
                raw = run(kind, str(texts_file), "raw")
                ours = run(kind, str(texts_file), "auto", args.cold)
                one = {"raw": raw, "auto": ours, "ratio_after_first_batch": raw["rest_s"] / ours["rest_s"]}
                if kind in BESIDE:
                    one["beside"] = run(kind, str(texts_file), BESIDE[kind], args.cold)
                    one["beside_over_auto_after_first_batch"] = ours["rest_s"] / one["beside"]["rest_s"]
                rounds.append(one)
            rows[kind] = {
                "engine": rounds[0]["auto"]["engine"],
                "auto_over_raw_after_first_batch": statistics.median(r["ratio_after_first_batch"] for r in rounds),
                "auto_set_up_s": statistics.median(r["auto"]["set_up_s"] for r in rounds),
                "auto_first_batch_s": statistics.median(r["auto"]["first_batch_s"] for r in rounds),
                "raw_set_up_s": statistics.median(r["raw"]["set_up_s"] for r in rounds),
                "auto_tokens_per_s": statistics.median(r["auto"]["tokens"] / r["auto"]["rest_s"] for r in rounds),
                **(
                    {
                        "beside": BESIDE[kind],
                        "beside_over_auto_after_first_batch": statistics.median(
                            r["beside_over_auto_after_first_batch"] for r in rounds
                        ),
                        "beside_set_up_s": statistics.median(r["beside"]["set_up_s"] for r in rounds),
                    }
                    if kind in BESIDE
                    else {}
                ),
                "rounds": rounds,
            }
            print(name, kind, rows[kind]["engine"], f"{rows[kind]['auto_over_raw_after_first_batch']:.2f}x", flush=True)
        megabytes = sum(len(t.encode()) for t in texts) / 1e6
        results["corpora"][name] = {"mb": round(megabytes, 2), "texts": len(texts), "tokenizers": rows}
    write_results(args.out, results, corpus=", ".join(corpora))


if __name__ == "__main__":
    main()

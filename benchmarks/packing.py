"""Whole-document packing against concat_chunk: padding, cut documents, truncation and speed.

    python benchmarks/packing.py [--mb 10] [--seq-lens 2048,8192] [--repeats 3]

On three corpora of real text (``docs``: the package documentation under /usr/share/doc in a
seeded random order, mostly short documents with a long tail, as crawled pages are; ``code``: the standard library's
sources beside those docs; ``prose``: the shipped Shakespeare and Python docs, long
documents), tokenized with GPT-2 plus BOS/EOS, every packing is run through the real
pipeline and measured on its rows:
- ``padding``: pad tokens / all tokens in rows;
- ``cut_documents``: documents whose tokens land in more than one row, / documents;
- ``tokens_without_their_start``: tokens whose row does not hold the first token of their
  document (the context concatenation costs), / real tokens;
- ``truncated``: tokens dropped (truncate policy), / document tokens.
Speed: the packer alone over the tokenized documents (tokens/s), concat_chunk and best fit
alternating within each round; ratios are medians of same-round pairs, on one process.
Writes benchmarks/results/packing.json with date, command, corpus and cores.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import platform
import statistics
import sys
import time
from typing import Any

import numpy as np

from beamtok import Dataset
from beamtok._src.core.spec import PackSpec
from beamtok._src.transforms.pack import TokenDoc
from beamtok._src.transforms.packing_modes import make_packer

from common import ROOT, build_shards, write_results

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
BOS = 50256


def packings(seq_len: int) -> dict[str, Any]:
    return {
        "concat_chunk": lambda ds: ds.concat_chunk(seq_len),
        "best_fit window 64": lambda ds: ds.pack_documents(seq_len, window=64),
        "best_fit window 256": lambda ds: ds.pack_documents(seq_len, window=256),
        "best_fit window 1024": lambda ds: ds.pack_documents(seq_len, window=1024),
        "best_fit window 256, bos rows": lambda ds: ds.pack_documents(seq_len, window=256, bos=True),
        "best_fit window 256, truncate": lambda ds: ds.pack_documents(seq_len, window=256, long_docs="truncate"),
    }


def measure(paths: list[str], name: str, pack: Any, seq_len: int, doc_tokens: int, documents: int) -> dict[str, Any]:
    """The packing's figures, from its rows (and the documents' lengths for split pieces)."""
    it = pack(Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos()).iter()
    rows = real = pad = without_start = 0
    cut: set[tuple[int, int]] = set()
    for row in it:
        rows += 1
        segments = row["segment_ids"]
        here = int(np.count_nonzero(segments))
        real += here
        pad += len(segments) - here
        if name == "concat_chunk" and row["token"] > 0:  # the row opens inside a document begun earlier
            cut.add((row["shard"], row["doc"]))
            without_start += int(np.count_nonzero(segments == 1))
    stats = it.stats()
    truncated = stats["documents"]["truncated_tokens"]
    out = {"rows": rows, "padding": pad / (real + pad), "truncated": truncated / doc_tokens}
    if name != "concat_chunk" and "truncate" not in name:
        # split pieces after a document's first piece lack its start; their number and size
        # follow from the document lengths (recounted below, not from the packer)
        _, without_start, cut_docs = split_costs(paths, seq_len, bos="bos" in name)
        out["cut_documents"] = cut_docs / documents
    elif name == "concat_chunk":
        out["cut_documents"] = len(cut) / documents
    else:
        out["cut_documents"] = 0.0
    out["tokens_without_their_start"] = without_start / real
    assert stats["pad_tokens"] == pad and stats["tokens"] == real, "stats() disagree with the rows"
    return out


_LENGTHS: dict[tuple[str, ...], list[int]] = {}


def lengths(paths: list[str]) -> list[int]:
    key = tuple(paths)
    if key not in _LENGTHS:
        _LENGTHS[key] = [len(r["input_ids"]) for r in Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos()]
    return _LENGTHS[key]


def split_costs(paths: list[str], seq_len: int, *, bos: bool) -> tuple[int, int, int]:
    """Continuation pieces, their tokens, and documents cut, of splitting every document into
    rows (a BOS is added to each continuation piece when ``bos``)."""
    pieces = tokens = cut = 0
    step = seq_len - 1 if bos else seq_len
    for n in lengths(paths):
        if n > seq_len:
            cut += 1
            rest = n - seq_len
            more = -(-rest // step)
            pieces += more
            tokens += rest + (more if bos else 0)
    return pieces, tokens, cut


def packer_speed(docs: list[TokenDoc], seq_len: int, repeats: int) -> dict[str, Any]:
    """Tokens/s of the packer alone over tokenized documents, concat and best fit paired."""
    specs = {
        "concat_chunk": PackSpec("concat", seq_len, BOS),
        "best_fit window 256": PackSpec("best_fit", seq_len, BOS, window=256, long_docs="split"),
        "best_fit window 1024": PackSpec("best_fit", seq_len, BOS, window=1024, long_docs="split"),
    }
    tokens = sum(len(d.ids) for d in docs)
    rates: dict[str, list[float]] = {name: [] for name in specs}
    for _ in range(repeats):
        for name, spec in specs.items():
            packer = make_packer(spec)
            start = time.perf_counter()
            for i, doc in enumerate(docs):
                for _row in packer.add(i, doc):
                    pass
            for _row in packer.finish():
                pass
            rates[name].append(tokens / (time.perf_counter() - start))
    base = rates["concat_chunk"]
    return {
        name: {
            "tokens_per_s": statistics.median(r),
            "vs_concat_chunk": statistics.median(x / b for x, b in zip(r, base)),
            "rounds": r,
        }
        for name, r in rates.items()
    }


def batching(paths: list[str], max_tokens: int, repeats: int) -> dict[str, Any]:
    """Padding of one-document rows batched by count against by token budget, the power-of-two
    rows' truncation, and the batching speed (rows/s of collating fixed-size batches against
    token-budget batches of the same rows, paired rounds)."""
    from beamtok._src.stream.stages.collate import collate
    from beamtok._src.stream.stages.token_batch import BatchTokens, TokenBatchNode

    def area(ds: Any) -> tuple[float, int]:
        real = total = 0
        for b in ds:
            total += b["input_ids"].size
            real += (
                int(np.count_nonzero(b["segment_ids"]))
                if "segment_ids" in b
                else int(np.count_nonzero(b["attention_mask"]))
            )
        return 1 - real / total, total

    documents = (
        Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos().map(_with_mask, name="mask")
    )  # one document a row
    rows_per_batch = max_tokens // 2048
    out: dict[str, Any] = {
        f"batch({rows_per_batch}), one document a row": {"padding": area(documents.batch(rows_per_batch))[0]},
        f"batch_tokens({max_tokens}), one document a row": {"padding": area(documents.batch_tokens(max_tokens))[0]},
    }
    pow2 = Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos().pack_power_of_two(2048, min_len=64)
    it = pow2.iter()
    for _ in it:
        pass
    out[f"pack_power_of_two(2048) + batch_tokens({max_tokens})"] = {
        "padding": area(pow2.batch_tokens(max_tokens))[0],
        "truncated": it.stats()["documents"]["truncated_tokens"] / sum(lengths(paths)),
    }
    rows = list(documents)
    node = TokenBatchNode(iter(()), BatchTokens(max_tokens, window=len(rows)), BOS)
    fixed, budget = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(0, len(rows), rows_per_batch):
            collate(rows[i : i + rows_per_batch], BOS)
        fixed.append(len(rows) / (time.perf_counter() - start))
        start = time.perf_counter()
        node.arrange(rows, 0)
        budget.append(len(rows) / (time.perf_counter() - start))
    out["speed"] = {
        "batch_rows_per_s": statistics.median(fixed),
        "batch_tokens_rows_per_s": statistics.median(budget),
        "batch_tokens_vs_batch": statistics.median(b / f for b, f in zip(budget, fixed)),
    }
    return out


def balance(paths: list[str]) -> dict[str, Any]:
    """Attention-cost imbalance between 8 ranks of 4 rows (the largest rank's cost over the
    mean), dealt by ``balance_ranks`` and split plainly, for best-fit rows of 2,048 and for
    one document a row padded to 2,048; and the deal's own time per global batch."""
    out: dict[str, Any] = {}
    base = Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos()
    for name, ds in (
        ("pack_documents(2048)", base.pack_documents(2048)),
        ("pad(2048), one document a row", base.pad(2048)),
    ):
        it = ds.balance_ranks(4, rank=0, world_size=8).iter()
        for _ in it:
            pass
        timing = it.timing()["stages"]
        out[name] = {
            **it.stats()["balance"],
            "deal_seconds_per_global_batch": timing[1]["seconds"] / max(1, timing[1]["items"]),
        }
    return out


def _with_mask(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "attention_mask": np.ones(len(record["input_ids"]), dtype=np.int8)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10)
    parser.add_argument("--seq-lens", default="2048,8192")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": "python benchmarks/packing.py " + " ".join(sys.argv[1:]),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
        "tokenizer": "gpt2 (shipped), BOS and EOS on every document",
        "corpora": {},
    }
    for corpus in ("docs", "code", "prose"):
        paths = build_shards("packing", args.mb, 2, corpus)
        n = lengths(paths)
        doc_tokens = sum(n)
        figures: dict[str, Any] = {
            "documents": len(n),
            "document_tokens": doc_tokens,
            "document_length": {
                q: int(np.percentile(n, p)) for q, p in (("p10", 10), ("p50", 50), ("p90", 90), ("p99", 99))
            },
            "seq_lens": {},
        }
        docs = [TokenDoc(r["input_ids"], None) for r in Dataset.from_files(paths).tokenize(TOKENIZER).ensure_bos_eos()]
        for seq_len in (int(x) for x in args.seq_lens.split(",")):
            at: dict[str, Any] = {
                "documents_longer_than_a_row": sum(1 for x in n if x > seq_len) / len(n),
                "tokens_in_documents_longer_than_a_row": sum(x for x in n if x > seq_len) / doc_tokens,
                "packings": {},
            }
            for name, pack in packings(seq_len).items():
                at["packings"][name] = measure(paths, name, pack, seq_len, doc_tokens, len(n))
                shown = {k: round(v, 4) if isinstance(v, float) else v for k, v in at["packings"][name].items()}
                print(corpus, seq_len, name, shown, flush=True)
            at["packer_speed"] = packer_speed(docs, seq_len, args.repeats)
            print(
                corpus,
                seq_len,
                "speed",
                {k: round(v["vs_concat_chunk"], 3) for k, v in at["packer_speed"].items()},
                flush=True,
            )
            figures["seq_lens"][str(seq_len)] = at
        if corpus == "docs":
            figures["batching"] = batching(paths, 32768, args.repeats)
            print(corpus, "batching", figures["batching"], flush=True)
            figures["balance_ranks"] = balance(paths)
            print(corpus, "balance_ranks", figures["balance_ranks"], flush=True)
        results["corpora"][corpus] = figures
    write_results("packing.json", results, "prose, code and docs (benchmarks/common.py CORPORA), two files each")


if __name__ == "__main__":
    main()

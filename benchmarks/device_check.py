"""The GPU job's data path, ready for a machine with a device: one script, a few minutes.

    python benchmarks/device_check.py [--mb 64] [--workers 1,2,4,8,14] [--feed-steps 60]

Three parts, each written to ``benchmarks/results/device_check.json`` as it finishes:

1. **NCCL + DCP** (CUDA only): a one-process NCCL group (``start_process_group("nccl")``
   sets the device before any gather), a ``DistributedLoader`` read for a few batches, saved
   with ``dcp.save``, loaded into a fresh loader with ``dcp.load`` and read to the end: the
   rows must be the uninterrupted run's.
2. **Feeding the device** (CUDA only): batches of 8 x 1024 from a ``StatefulDataLoader``
   with 2 workers and ``pin_memory=True``, copied with ``non_blocking=True`` beside a small
   transformer's training step; tokens per second delivered into device memory, and the
   share of each step spent waiting for data.
3. **Scaling on the cores**: ``.parallel(n)`` streaming and Beam ``multi_processing`` builds
   (in-process at n = 1) at each ``--workers`` count up to the cores there are, over eight
   files and over one file (cut into ranges: ``split_bytes="auto"`` for the stream, 4 MiB
   ranges for the build), each in its own interpreter; tokens per second and the speed-up
   over n = 1.

Without CUDA it says so in one line, runs part 1 on gloo (the same save and load, no device)
and part 3 on the cores there are. ``make device-check`` runs it with its defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
WORK = HERE / "work" / "device-check"
SEQ_LEN = 1024
RESULTS = "device_check.json"


def dataset(paths: list[str], split_bytes: str | None = None) -> Any:
    from beamtok import Dataset

    return Dataset.from_files(paths, split_bytes=split_bytes).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(SEQ_LEN)


# ---------------------------------------------------------------------------- part 1


def nccl_dcp(paths: list[str], backend: str = "nccl") -> dict[str, Any]:
    """Save and load a DistributedLoader with DCP on a one-process group (NCCL; gloo where
    there is no CUDA, which checks the same path but the device)."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from beamtok.distributed.process_group import end_process_group, start_process_group
    from beamtok.distributed.torch_loader import DistributedLoader

    started = time.perf_counter()
    start_process_group(backend)
    ds = dataset(paths[:2]).batch(4, tensors="torch")
    whole = [r for b in DistributedLoader(ds) for r in zip(b["shard"].tolist(), b["index"].tolist())]
    loader = DistributedLoader(ds)
    batches = iter(loader)
    first = [r for _, b in zip(range(5), batches) for r in zip(b["shard"].tolist(), b["index"].tolist())]
    checkpoint = WORK / "nccl-ckpt"
    shutil.rmtree(checkpoint, ignore_errors=True)
    dcp.save({"data": loader}, checkpoint_id=str(checkpoint))
    fresh = DistributedLoader(ds)
    dcp.load({"data": fresh}, checkpoint_id=str(checkpoint))
    rest = [r for b in fresh for r in zip(b["shard"].tolist(), b["index"].tolist())]
    backend = dist.get_backend()
    end_process_group()
    return {
        "backend": backend,
        "rows": len(whole),
        "resumed_exactly": first + rest == whole,
        "seconds": time.perf_counter() - started,
    }


# ---------------------------------------------------------------------------- part 2


def feed(paths: list[str], steps: int, device_name: str = "cuda", dim: int = 512) -> dict[str, Any]:
    """Tokens/s delivered into device memory beside a small model's step (``dim`` wide), and
    the data-wait share."""
    import torch
    from torch import nn
    from torchdata.stateful_dataloader import StatefulDataLoader

    device = torch.device(device_name)
    cuda = device.type == "cuda"
    ds = dataset(paths).repeat().batch(8, tensors="torch")
    loader = StatefulDataLoader(ds.to_torch(), batch_size=None, num_workers=2, pin_memory=cuda)
    vocab = 50304
    layer = nn.TransformerEncoderLayer(dim, 8, 4 * dim, batch_first=True)
    model = nn.Sequential(nn.Embedding(vocab, dim), layer, nn.Linear(dim, vocab)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batches = iter(loader)
    waits, totals, tokens = [], [], 0
    first_batch = None
    began = time.perf_counter()
    for step in range(steps):
        t0 = time.perf_counter()
        batch = next(batches)
        ids = batch["input_ids"].to(device, non_blocking=True).long()
        mask = batch["loss_mask"].to(device, non_blocking=True)
        t1 = time.perf_counter()
        if first_batch is None:
            first_batch = t1 - began
        logits = model(ids)
        loss = (
            nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
            * mask[:, 1:].flatten()
        ).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        if step >= 5:  # past the workers' start and the kernels' first compilation
            waits.append(t1 - t0)
            totals.append(t2 - t0)
            tokens += int(ids.numel())
    return {
        "steps_timed": len(totals),
        "tokens_per_s_into_device": tokens / sum(totals),
        "data_wait_share": sum(waits) / sum(totals),
        "median_step_s": sorted(totals)[len(totals) // 2],
        "first_batch_s": first_batch,
        "device": torch.cuda.get_device_name(0) if cuda else device_name,
    }


# ---------------------------------------------------------------------------- part 3


def one(kind: str, paths: list[str], workers: int, output: str) -> dict[str, Any]:
    """One scaling measurement in this interpreter: tokens and seconds."""
    from beamtok import load_tokenizer

    load_tokenizer(TOKENIZER).fast_path()
    if kind == "stream":
        ds = dataset(paths, "auto" if len(paths) == 1 else None)
        if workers > 1:
            ds = ds.parallel(workers)
        started = time.perf_counter()
        tokens = sum(int((b["segment_ids"] > 0).sum()) for b in ds.batch(8).iter())
        return {"tokens": tokens, "seconds": time.perf_counter() - started}
    import apache_beam  # noqa: F401  (imported before the clock, as the stream's modules are)

    options: dict[str, Any] = (
        {"direct_running_mode": "multi_processing", "direct_num_workers": workers} if workers > 1 else {}
    )
    started = time.perf_counter()
    cached = dataset(paths).cache(output, progress=False, split_bytes=4 << 20, **options)
    seconds = time.perf_counter() - started
    return {"tokens": int(cached.pipeline.root.origin.cache.manifest.totals["tokens"]), "seconds": seconds}


def scaling(eight: list[str], single: list[str], counts: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("stream", "build"):
        for name, paths in (("eight files", eight), ("one file", single)):
            runs = {}
            for n in counts:
                target = WORK / "cache"
                shutil.rmtree(target, ignore_errors=True)
                command = [sys.executable, __file__, "_one", json.dumps([kind, paths, n, str(target)])]
                proc = subprocess.run(command, capture_output=True, text=True, cwd=HERE)
                if proc.returncode != 0:
                    raise SystemExit(f"{kind} {name} n={n} failed:\n{proc.stderr[-3000:]}")
                runs[n] = json.loads(proc.stdout.strip().splitlines()[-1])
                runs[n]["tokens_per_s"] = runs[n]["tokens"] / runs[n]["seconds"]
                print(f"  {kind:<6} {name:<11} n={n:<2} {runs[n]['tokens_per_s'] / 1e6:6.2f} M tokens/s", flush=True)
            base = runs[counts[0]]["tokens_per_s"]
            out[f"{kind}, {name}"] = {str(n): {**r, "speedup": r["tokens_per_s"] / base} for n, r in runs.items()}
    shutil.rmtree(WORK / "cache", ignore_errors=True)
    return out


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=64.0)
    parser.add_argument("--workers", default="1,2,4,8,14")
    parser.add_argument("--feed-steps", type=int, default=60)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import build_shards, write_results

    WORK.mkdir(parents=True, exist_ok=True)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    counts = sorted({n for n in (int(x) for x in args.workers.split(",")) if n <= cores} | {1})
    eight = build_shards("device-check", args.mb, 8)
    single = build_shards("device-check-one", args.mb, 1)
    results: dict[str, Any] = {"cores": cores, "worker_counts": counts}
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        results["nccl_dcp"] = nccl_dcp(eight)
        print(f"nccl + dcp: {results['nccl_dcp']}", flush=True)
        write_results(RESULTS, results)
        results["feed"] = feed(eight, args.feed_steps)
        print(f"feeding the device: {results['feed']}", flush=True)
        write_results(RESULTS, results)
    else:
        print(
            "device_check: no CUDA device here: part 1 runs on gloo, part 2 (feeding the device) is skipped, part 3 runs on the cores there are",
            flush=True,
        )
        results["cuda"] = "none: part 1 on gloo, part 2 not run"
        results["gloo_dcp"] = nccl_dcp(eight, "gloo")
        print(f"gloo + dcp: {results['gloo_dcp']}", flush=True)
    print(f"scaling on {cores} cores, workers {counts}:", flush=True)
    results["scaling"] = scaling(eight, single, counts)
    write_results(RESULTS, results)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        print(json.dumps(one(*json.loads(sys.argv[2]))), flush=True)
    else:
        main()

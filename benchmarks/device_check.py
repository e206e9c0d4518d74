"""The GPU job's data path, ready for a machine with a device: one script, a few minutes.

    python benchmarks/device_check.py [--mb 64] [--workers 1,2,4,8,14] [--feed-steps 60] [--out NAME]

Three parts, each written to ``benchmarks/results/device_check.json`` (``--out``) as it finishes:

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
   over n = 1. The one-process run is made first and again last in each series: the speed-up
   is taken over the mean of the two, and their spread is recorded beside it (on a shared
   virtual machine one process's rate moved by a quarter between identical runs).

The machine is recorded with the results: the processor's model, its logical CPUs and how
many of them share a physical core (16 logical CPUs may be 8 cores), the GPU and the versions.

Without CUDA it says so in one line, runs part 1 on gloo (the same save and load, no device)
and part 3 on the cores there are. ``make device-check`` runs it with its defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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

    from beamtok._src.distributed.process_group import end_process_group, start_process_group
    from beamtok._src.distributed.torch_loader import DistributedLoader

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

    _ = load_tokenizer(TOKENIZER).engine_choice  # the engine chosen before timing
    if kind == "stream":
        ds = dataset(paths, "auto" if len(paths) == 1 else None)
        if workers > 1:
            ds = ds.parallel(workers)
        started, cpu = time.perf_counter(), time.process_time()
        tokens = batches = 0
        for batch in ds.batch(8).iter():
            tokens += int((batch["segment_ids"] > 0).sum())
            batches += 1
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        # the consuming process's own CPU (its workers' is not counted): what a batch costs it
        return {"tokens": tokens, "seconds": seconds, "consumer_cpu_ms_a_batch": 1e3 * cpu / max(1, batches)}
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
            runs = {str(n): measure(kind, name, paths, n) for n in counts}
            again = measure(kind, name, paths, 1)
            rates = (runs["1"]["tokens_per_s"], again["tokens_per_s"])
            base = sum(rates) / 2
            series: dict[str, Any] = {n: {**r, "speedup": r["tokens_per_s"] / base} for n, r in runs.items()}
            series["1, again last"] = again
            series["one process, spread of its two runs"] = max(rates) / min(rates)
            out[f"{kind}, {name}"] = series
    shutil.rmtree(WORK / "cache", ignore_errors=True)
    return out


def measure(kind: str, name: str, paths: list[str], workers: int) -> dict[str, Any]:
    """One run of :func:`one` in an interpreter of its own, with its rate."""
    target = WORK / "cache"
    shutil.rmtree(target, ignore_errors=True)
    command = [sys.executable, __file__, "_one", json.dumps([kind, paths, workers, str(target)])]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=HERE)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} {name} n={workers} failed:\n{proc.stderr[-3000:]}")
    run: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    run["tokens_per_s"] = run["tokens"] / run["seconds"]
    print(f"  {kind:<6} {name:<11} n={workers:<2} {run['tokens_per_s'] / 1e6:6.2f} M tokens/s", flush=True)
    return run


def machine() -> dict[str, Any]:
    """The processor (model, logical CPUs, logical CPUs per physical core), GPU and versions."""
    facts: dict[str, Any] = {"logical_cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "model name" in fields:
        facts["cpu_model"] = fields["model name"]
    if fields.get("siblings", "").isdigit() and fields.get("cpu cores", "").isdigit():
        facts["logical_cpus_per_core"] = int(fields["siblings"]) // max(1, int(fields["cpu cores"]))
    try:
        import torch

        facts["torch"] = torch.__version__
        if torch.cuda.is_available():
            facts["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return facts


# ---------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=64.0)
    parser.add_argument("--workers", default="1,2,4,8,14")
    parser.add_argument("--feed-steps", type=int, default=60)
    parser.add_argument("--out", default=RESULTS, help="the results file's name under benchmarks/results")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import build_shards, write_results

    WORK.mkdir(parents=True, exist_ok=True)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    counts = sorted({n for n in (int(x) for x in args.workers.split(",")) if n <= cores} | {1})
    eight = build_shards("device-check", args.mb, 8)
    single = build_shards("device-check-one", args.mb, 1)
    facts = machine()
    described = f"{facts.get('cpu_model', 'a processor')}, {facts['logical_cpus']} logical CPUs"
    if "logical_cpus_per_core" in facts:
        described += f" ({facts['logical_cpus_per_core']} a core)"
    described += f"; {facts.get('gpu', 'no GPU')}"
    results: dict[str, Any] = {"cores": cores, "machine": described, "machine_facts": facts, "worker_counts": counts}
    if "gpu" in facts:  # machine() found torch and a CUDA device
        results["nccl_dcp"] = nccl_dcp(eight)
        print(f"nccl + dcp: {results['nccl_dcp']}", flush=True)
        write_results(args.out, results)
        results["feed"] = feed(eight, args.feed_steps)
        print(f"feeding the device: {results['feed']}", flush=True)
        write_results(args.out, results)
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
    write_results(args.out, results)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        print(json.dumps(one(*json.loads(sys.argv[2]))), flush=True)
    else:
        main()

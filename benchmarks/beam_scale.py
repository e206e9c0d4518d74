"""Cache builds at scale: one large file on two Beam workers, many small files, tokens per core.

    python benchmarks/beam_scale.py [--mb 200] [--small-files 2000] [--rounds 2] [--out beam_scale.json] [--min-ratio 1.7]

Each build runs in its own interpreter (``files -> tokenize -> ensure_bos_eos ->
concat_chunk(2048) -> cache``), timed around ``Dataset.cache`` (the Beam pipeline, worker
start included; the tokenizer is loaded before). Once per round:

- one JSONL file of ``--mb`` MB of real text, default engine (the exact fast path) and
  ``engine="tokenizers"`` (with one Rayon thread per process, so in-process is one core: left to
  itself, ``tokenizers`` spreads one process over every core): in-process (FnApiRunner, one
  worker) and ``multi_processing`` with 2 workers, both with the default ``--split-bytes``
  (16 MiB, so the file is tokenized in ranges); in-process with ``split_bytes=None`` too
  (what splitting costs on one worker);
- the same amount of text as 8 files (``--mb``/8 MB each, split too where larger than 16 MiB),
  default engine, in-process and on 2 workers;
- the same file through the ``beamtok cache`` command, in-process and on 2 workers, timed
  from start to exit (tokenizer load and Beam import included, as a user waits for them);
- the fast-path engine alone on 40 MB of the text, in one process and in two at once: what
  two busy processes get of this machine's two cores, with no Beam in between;
- ``--small-files`` files of about 1 KB, and one such file alone: the per-file overhead is
  the difference divided by the files added;
- the raw Hugging Face ``tokenizers`` (``encode_batch_fast``, one Rayon thread) on 20 MB of
  the same text: the build's tokens per second per core against it;
- the one file's steps run here without Beam: tokenizing its ranges, packing each range's
  row groups into a file of its own, joining them into the shard's file. From them,
  ``bounds``: the best 2 workers could do against the in-process build of the same round if
  tokenizing and packing halved (the join stays one worker's), and the seconds that are
  Beam's own (start, workers, stages) in each mode.

Ratios are medians over rounds of ratios taken within a round. The machine has 2 cores, so 2
workers share them with the launching process. Writes benchmarks/results/beam_scale.json.
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
ROOT = HERE.parent
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
WORK = HERE / "work" / "beam-scale"
TWO_WORKERS = {"direct_running_mode": "multi_processing", "direct_num_workers": 2}


def build(paths: list[str], backend: str, options: dict[str, Any], split: str | None) -> dict[str, Any]:
    """Build a cache of ``paths``; seconds of ``Dataset.cache`` and the tokens written."""
    from beamtok import Dataset

    ds = (
        Dataset.from_files(paths)
        .tokenize(TOKENIZER, engine={"hf": "tokenizers", "tiktoken": "exact"}.get(backend, backend))
        .ensure_bos_eos()
        .concat_chunk(2048)
    )
    out = WORK / "cache"
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    ds.cache(str(out), progress=False, split_bytes=split, **options)
    seconds = time.perf_counter() - start
    tokens = json.loads((out / "manifest.json").read_text())["totals"]["tokens"]
    return {"seconds": seconds, "tokens": tokens}


def command(path: str, options: list[str]) -> dict[str, Any]:
    """The whole ``beamtok cache`` command a user types for ``path`` (the same steps as
    :func:`build`), timed from start to exit: interpreter start, tokenizer load, Beam import,
    worker start and the build, as the user waits for them."""
    out = WORK / "cli-cache"
    shutil.rmtree(out, ignore_errors=True)
    argv = [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        path,
        "--output",
        str(out),
        "--tokenizer",
        TOKENIZER,
        "--seq-len",
        "2048",
        "--split-bytes",
        "16MiB",
        "--quiet",
        *options,
    ]
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "tokens": json.loads((out / "manifest.json").read_text())["totals"]["tokens"]}


def phases(path: str, backend: str, split: str) -> dict[str, Any]:
    """The steps of a split file's build, run here one after the other without Beam:
    tokenizing its ranges, packing each range's row groups (both shared by workers), and
    joining the groups into the shard's file (one worker's). The rest of a build's time is Beam's."""
    from beamtok import Dataset
    from beamtok._src.cache.build.range_pack import RangeTokens, join_parts, pack_part, plan_pack_tasks
    from beamtok._src.cache.build.ranges import parse_size, plan_ranges, range_file, write_range_file
    from beamtok._src.cache.build.writer import rows_per_group
    from beamtok._src.cache.format.storage import Storage
    from beamtok._src.shards.processor import ShardProcessor

    ds = (
        Dataset.from_files([path])
        .tokenize(TOKENIZER, engine={"hf": "tokenizers", "tiktoken": "exact"}.get(backend, backend))
        .ensure_bos_eos()
        .concat_chunk(2048)
    )
    out = WORK / "phases"
    shutil.rmtree(out, ignore_errors=True)
    storage = Storage(str(out))
    spec, (shard,) = ds.spec, ds.shards
    processor = ShardProcessor(spec)
    processor.prepare()
    parts = plan_ranges(shard, spec.source, parse_size(split))
    start = time.perf_counter()
    ranges = []
    for part in parts:
        written = write_range_file(storage, range_file(part), processor.documents(shard, part.start, part.stop))
        ranges.append(RangeTokens(part.number, part.count, range_file(part), written.tokens))
    tokenize = time.perf_counter() - start
    start = time.perf_counter()
    group = rows_per_group(2048)
    packed = [pack_part(storage, processor, task, group) for task in plan_pack_tasks(0, ranges, 2048, group, "pad")]
    pack = time.perf_counter() - start
    start = time.perf_counter()
    entry = join_parts(storage, shard, packed, spec.fingerprint)
    join = time.perf_counter() - start
    return {
        "seconds": tokenize + pack + join,
        "tokens": entry.tokens,
        "tokenize_s": tokenize,
        "pack_s": pack,
        "join_s": join,
        "ranges": len(parts),
        "pack_tasks": len(packed),
    }


def first_texts(path: str, mb: float) -> list[str]:
    """The texts of the first ``mb`` MB of the JSONL file ``path``."""
    texts, size = [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            texts.append(json.loads(line)["text"])
            size += len(line)
            if size >= mb * 1e6:
                break
    return texts


def raw_tokenizers(path: str, mb: float) -> dict[str, Any]:
    """Raw ``tokenizers`` (one Rayon thread, as every measurement) over the first ``mb`` MB of ``path``."""
    from beamtok import load_tokenizer

    tok = load_tokenizer(TOKENIZER).backend  # the Rust tokenizer itself
    texts = first_texts(path, mb)
    start = time.perf_counter()
    tokens = sum(len(e.ids) for e in tok.encode_batch_fast(texts))
    return {"seconds": time.perf_counter() - start, "tokens": tokens}


def fast_path_engine(path: str, mb: float) -> dict[str, Any]:
    """The build's engine alone (the fast path's ``encode_batch``) over the first ``mb`` MB of
    ``path``, its encoder built before the clock starts."""
    from beamtok import load_tokenizer

    tok = load_tokenizer(TOKENIZER)
    texts = first_texts(path, mb)
    tok.encode_batch(texts[:1])
    start = time.perf_counter()
    tokens = sum(len(ids) for ids in tok.encode_batch(texts))
    return {"seconds": time.perf_counter() - start, "tokens": tokens}


def start(kind: str, *args: Any) -> subprocess.Popen[str]:
    """One measurement in an interpreter of its own (``measure KIND ARGS``), started."""
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}  # worker processes inherit it
    argv = [sys.executable, __file__, "measure", kind, json.dumps(args)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=HERE, env=env)


def result_of(proc: subprocess.Popen[str], kind: str) -> dict[str, Any]:
    """What a :func:`start`-ed measurement printed last, with its tokens per second."""
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{kind} {proc.args}: failed\n{err}")
    result = json.loads(out.strip().splitlines()[-1])
    return {**result, "tokens_per_s": result["tokens"] / result["seconds"]}


def run(kind: str, *args: Any) -> dict[str, Any]:
    return result_of(start(kind, *args), kind)


def side_by_side(path: str, mb: float) -> list[dict[str, Any]]:
    """Two processes running :func:`fast_path_engine` at once: what two cores of this machine
    give two busy processes (memory and caches shared), with no Beam in between."""
    procs = [start("engine", path, mb) for _ in range(2)]
    return [result_of(proc, "engine") for proc in procs]


def small_files(count: int) -> list[str]:
    from common import shipped_documents

    directory = WORK / f"small-{count}"
    paths = [str(directory / f"doc-{i:05d}.jsonl") for i in range(count)]
    if not all(os.path.exists(p) for p in paths):
        directory.mkdir(parents=True, exist_ok=True)
        paragraphs = [p for doc in shipped_documents() for p in doc.split("\n\n") if len(p) > 200]
        for i, path in enumerate(paths):
            text = "\n\n".join(paragraphs[(3 * i + k) % len(paragraphs)] for k in range(3))[:1000]
            Path(path).write_text(json.dumps({"text": text}) + "\n", encoding="utf-8")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0)
    parser.add_argument("--small-files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="beam_scale.json", help="file name under benchmarks/results")
    parser.add_argument(
        "--min-ratio",
        type=float,
        default=None,
        help="exit 1 when 2 workers reach less than this over in-process (one file, 8 files)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import build_jsonl, build_shards, machine_line, write_results

    big = str(build_jsonl(f"one-file-{args.mb:g}mb", int(args.mb * 1e6)))
    eight = build_shards("eight-files", args.mb, 8)
    many = small_files(args.small_files)
    runs: dict[str, list[dict[str, Any]]] = {}

    def record(name: str, result: dict[str, Any]) -> None:
        runs.setdefault(name, []).append(result)
        print(f"  {name:<44} {result['seconds']:8.2f} s  {result['tokens_per_s'] / 1e6:6.2f} M tokens/s", flush=True)

    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}", flush=True)
        for backend in ("auto", "hf"):
            record(f"one file, {backend}, in-process", run("build", [big], backend, {}, "16MiB"))
            record(f"one file, {backend}, 2 workers", run("build", [big], backend, TWO_WORKERS, "16MiB"))
        record("one file, beamtok cache command, in-process", run("command", big, []))
        record(
            "one file, beamtok cache command, 2 workers",
            run("command", big, [f"--{k}={v}" for k, v in TWO_WORKERS.items()]),
        )
        record("one file, auto, in-process, unsplit", run("build", [big], "auto", {}, None))
        record("8 files, auto, in-process", run("build", eight, "auto", {}, "16MiB"))
        record("8 files, auto, 2 workers", run("build", eight, "auto", TWO_WORKERS, "16MiB"))
        record("raw tokenizers, 1 thread, 20 MB", run("raw", big, 20.0))
        record("fast-path engine alone, 40 MB", run("engine", big, 40.0))
        pair = side_by_side(big, 40.0)
        record(
            "fast-path engine, 2 processes side by side, 40 MB (slower of the two)",
            min(pair, key=lambda r: r["tokens_per_s"]),
        )
        record("one file, auto, its steps without Beam", run("phases", big, "auto", "16MiB"))
        record(
            f"{args.small_files} small files, auto, in-process",
            run("build", [str(Path(many[0]).parent / "doc-*.jsonl")], "auto", {}, "16MiB"),
        )
        record("1 small file, auto, in-process", run("build", many[:1], "auto", {}, "16MiB"))

    def paired(a: str, b: str, key: str = "tokens_per_s") -> float:
        return statistics.median(x[key] / y[key] for x, y in zip(runs[a], runs[b]))

    overhead_ms = statistics.median(
        (x["seconds"] - y["seconds"]) / (args.small_files - 1) * 1e3
        for x, y in zip(
            runs[f"{args.small_files} small files, auto, in-process"], runs["1 small file, auto, in-process"]
        )
    )
    ratios = {
        "one file, 2 workers / in-process (default engine)": paired(
            "one file, auto, 2 workers", "one file, auto, in-process"
        ),
        "one file, 2 workers / in-process (backend=hf)": paired("one file, hf, 2 workers", "one file, hf, in-process"),
        "8 files, 2 workers / in-process (default engine)": paired(
            "8 files, auto, 2 workers", "8 files, auto, in-process"
        ),
        "one file, the beamtok cache command, 2 workers / in-process": paired(
            "one file, beamtok cache command, 2 workers", "one file, beamtok cache command, in-process"
        ),
        "engine: one of 2 processes side by side / alone (what 2 cores give here)": paired(
            "fast-path engine, 2 processes side by side, 40 MB (slower of the two)", "fast-path engine alone, 40 MB"
        ),
        "one file in-process, split / unsplit": paired(
            "one file, auto, in-process", "one file, auto, in-process, unsplit"
        ),
        "build in-process (backend=hf) / raw tokenizers, per core": paired(
            "one file, hf, in-process", "raw tokenizers, 1 thread, 20 MB"
        ),
        "build in-process (default engine) / raw tokenizers, per core": paired(
            "one file, auto, in-process", "raw tokenizers, 1 thread, 20 MB"
        ),
    }
    steps = runs["one file, auto, its steps without Beam"]
    in_process = runs["one file, auto, in-process"]
    # With 2 workers nothing but tokenizing the ranges can take half the time; with the pack
    # step shared too (what the issue asks for), that would also halve. Bounds, per round:
    bounds = {
        "2 workers / in-process at best (tokenizing and packing halved, the join not)": statistics.median(
            b["seconds"] / (b["seconds"] - (s["tokenize_s"] + s["pack_s"]) / 2) for b, s in zip(in_process, steps)
        ),
        "Beam's own seconds in-process (build less its steps)": statistics.median(
            b["seconds"] - s["seconds"] for b, s in zip(in_process, steps)
        ),
        "Beam's own seconds with 2 workers (build less tokenizing and packing halved, and the join)": statistics.median(
            b["seconds"] - (s["tokenize_s"] + s["pack_s"]) / 2 - s["join_s"]
            for b, s in zip(runs["one file, auto, 2 workers"], steps)
        ),
    }
    results = {
        "machine": machine_line(),
        "date": time.strftime("%Y-%m-%d"),
        "command": f"python benchmarks/beam_scale.py --mb {args.mb:g} --small-files {args.small_files} --rounds {args.rounds}"
        + ("" if args.out == "beam_scale.json" else f" --out {args.out}")
        + ("" if args.min_ratio is None else f" --min-ratio {args.min_ratio:g}"),
        "one_file_mb": os.path.getsize(big) / 1e6,
        "seconds": {k: statistics.median(x["seconds"] for x in v) for k, v in runs.items()},
        "tokens_per_s": {k: statistics.median(x["tokens_per_s"] for x in v) for k, v in runs.items()},
        "ratios": ratios,
        "per_small_file_overhead_ms": overhead_ms,
        "one_file_steps": {
            "tokenize_s": statistics.median(x["tokenize_s"] for x in steps),
            "pack_s": statistics.median(x["pack_s"] for x in steps),
            "join_s": statistics.median(x["join_s"] for x in steps),
            "ranges": steps[0]["ranges"],
            "pack_tasks": steps[0]["pack_tasks"],
        },
        "bounds": bounds,
        "runs": runs,
    }
    for key, value in ratios.items():
        print(f"  {key:<62} {value:6.2f}x")
    print(f"  per-file overhead ({args.small_files} files of ~1 KB): {overhead_ms:.1f} ms")
    for key, value in bounds.items():
        print(f"  {key:<62} {value:6.2f}")
    if args.min_ratio is not None:
        checked = [
            "one file, 2 workers / in-process (default engine)",
            "8 files, 2 workers / in-process (default engine)",
        ]
        results["target"] = {
            "min_ratio": args.min_ratio,
            "met": {key: ratios[key] >= args.min_ratio for key in checked},
        }
    write_results(
        args.out,
        results,
        "the shipped prose (data/corpus), repeated: one file of --mb MB, the same text as 8 files, and small files of its paragraphs",
    )
    if args.min_ratio is not None and not all(results["target"]["met"].values()):
        missed = {key: round(ratios[key], 2) for key, met in results["target"]["met"].items() if not met}
        raise SystemExit(f"2 workers / in-process below {args.min_ratio}x: {missed}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "measure":
        kind, arguments = sys.argv[2], json.loads(sys.argv[3])
        measure = {
            "build": build,
            "raw": raw_tokenizers,
            "phases": phases,
            "command": command,
            "engine": fast_path_engine,
        }[kind]
        print(json.dumps(measure(*arguments)), flush=True)
    else:
        main()

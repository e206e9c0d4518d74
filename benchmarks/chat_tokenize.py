"""Chat tokenization against ``transformers``: beamtok's ``tokenize_chat`` (each conversation
rendered once, trained text from the template's markers or located in the render) against a
loop of ``apply_chat_template(tokenize=True, return_dict=True, return_assistant_tokens_mask=True)``,
on multi-turn conversations made of the shipped text, one core pinned.

Each side runs in an interpreter of its own, pinned to CPU 0 with one Rayon thread, in
alternating rounds; a round's ratio is the reference's seconds over beamtok's. The times are
whole: loading the tokenizer and compiling the template included (reported apart as
``setup_s``). The tokenizer is GPT-2's with the templates' control tokens added, saved as
``transformers`` saves a chat model's tokenizer.

    python benchmarks/chat_tokenize.py --conversations 10000 --rounds 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, WORK, machine_line, measured, shipped_documents, write_results

TEMPLATES = ("qwen2_5_training", "qwen3", "llama3_training", "gptoss")


def conversations(count: int, seed: int = 0) -> list[list[dict[str, Any]]]:
    """``count`` conversations of 1-4 turns, a third with a system prompt; questions are a
    document's first sentence, answers one or two documents joined as paragraphs."""
    docs = [d for d in shipped_documents() if 40 < len(d) < 1500]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        messages: list[dict[str, Any]] = []
        if rng.random() < 1 / 3:
            messages.append({"role": "system", "content": "You answer from the text you were given."})
        for _ in range(rng.randint(1, 4)):
            question = rng.choice(docs).split(". ")[0].strip() + "?"
            answer = "\n\n".join(rng.choice(docs) for _ in range(rng.randint(1, 2)))
            messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        out.append(messages)
    return out


def tokenizer_dir() -> Path:
    """GPT-2 with the chat templates' control tokens, as transformers saves it (made once)."""
    import re

    from transformers import AutoTokenizer

    directory = WORK / "chat-tokenizer"
    if (directory / "tokenizer.json").exists():
        return directory
    found = {"<think>", "</think>", "<tool_call>", "</tool_call>"}
    for name in TEMPLATES:
        found |= set(re.findall(r"<\|[A-Za-z_./=0-9 -]{1,40}\|>", template_path(name).read_text()))
    hf = AutoTokenizer.from_pretrained(str(ROOT / "data" / "tokenizers" / "gpt2"))
    hf.add_special_tokens({"additional_special_tokens": sorted(found - {"<|endoftext|>"})})
    hf.save_pretrained(str(directory))
    return directory


def template_path(name: str) -> Path:
    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("trl is not installed: make setup installs it (the dev extra)")
    return Path(next(iter(spec.submodule_search_locations))) / "chat_templates" / f"{name}.jinja"


def run_side(side: str, template: str, count: int) -> dict[str, Any]:
    """One side's timing, in this (pinned) process."""
    messages = conversations(count)
    source = template_path(template).read_text()
    start = time.perf_counter()
    if side == "beamtok":
        from beamtok import Dataset

        ds = Dataset.from_sequence([{"messages": m} for m in messages]).tokenize_chat(
            str(tokenizer_dir()), template=source, date="2026-12-07"
        )
        it = iter(ds)
        first = next(it)
        setup = time.perf_counter() - start
        tokens = len(first["input_ids"]) + sum(len(example["input_ids"]) for example in it)
    else:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(str(tokenizer_dir()))
        hf.apply_chat_template(messages[0], chat_template=source, tokenize=True)
        setup = time.perf_counter() - start
        tokens = 0
        for conversation in messages:
            out = hf.apply_chat_template(
                conversation,
                chat_template=source,
                tokenize=True,
                return_dict=True,
                return_assistant_tokens_mask=True,
            )
            tokens += len(out["input_ids"])
    return {"seconds": time.perf_counter() - start, "setup_s": setup, "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--templates", default=",".join(TEMPLATES))
    parser.add_argument("--side", choices=("beamtok", "transformers"), help=argparse.SUPPRESS)
    parser.add_argument("--template", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="chat_tokenize.json")
    args = parser.parse_args()
    if args.side:  # a measuring interpreter
        os.sched_setaffinity(0, {0})
        import logging

        logging.disable(logging.WARNING)  # transformers warns once a template without markers
        print(json.dumps(run_side(args.side, args.template, args.conversations)))
        return
    tokenizer_dir()
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    rows = []
    for template in args.templates.split(","):
        rounds = []
        for round_number in range(args.rounds):
            sides = ("beamtok", "transformers") if round_number % 2 == 0 else ("transformers", "beamtok")
            got = {
                side: measured(
                    [
                        sys.executable,
                        __file__,
                        "--side",
                        side,
                        "--template",
                        template,
                        "--conversations",
                        str(args.conversations),
                    ],
                    f"{side} on {template}",
                    env=env,
                    cwd=ROOT,
                )
                for side in sides
            }
            assert got["beamtok"]["tokens"] == got["transformers"]["tokens"], got  # the same ids, counted
            rounds.append({**got, "ratio": got["transformers"]["seconds"] / got["beamtok"]["seconds"]})
            print(template, round_number, f"{rounds[-1]['ratio']:.2f}x", flush=True)
        ratios = [r["ratio"] for r in rounds]
        rows.append({"template": template, "rounds": rounds, "ratio_median": statistics.median(ratios),
                     "ratio_min": min(ratios), "ratio_max": max(ratios)})  # fmt: skip
    write_results(
        args.out,
        {
            "machine": machine_line(),
            "pinned": "CPU 0, RAYON_NUM_THREADS=1, each side a process of its own",
            "conversations": args.conversations,
            "tokenizer": "GPT-2 with the templates' control tokens added",
            "reference": "a loop of apply_chat_template(tokenize=True, return_dict=True, return_assistant_tokens_mask=True)",
            "templates": rows,
        },
        corpus="conversations of 1-4 turns made of the shipped prose and Python docs, a third with a system prompt",
    )


if __name__ == "__main__":
    main()

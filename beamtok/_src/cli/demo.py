"""``beamtok demo``: stream the corpus shipped in the package, checkpoint, resume."""

from __future__ import annotations

import json
import os
import time

import click

from beamtok._src.cli.app import log_options, main, user_errors

__all__ = ["demo"]

DEMO_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "demo"
)  # shipped inside the package
DEMO_DATA = os.path.join(DEMO_DIR, "corpus", "shakespeare-{04..05}.jsonl.gz")
DEMO_TOKENIZER = os.path.join(DEMO_DIR, "gpt2")


@main.command()
@click.option(
    "--data",
    "urls",
    multiple=True,
    default=[DEMO_DATA],
    help="Input URL patterns. [default: Shakespeare shipped with beamtok]",
)
@click.option(
    "--tokenizer", default=DEMO_TOKENIZER, help="Tokenizer directory or hub name. [default: GPT-2 shipped with beamtok]"
)
@click.option("--seq-len", default=64, show_default=True, help="Tokens per packed row.")
@click.option("--batch-size", default=2, show_default=True)
@click.option("--batches", default=2, show_default=True, help="How many batches to print.")
@click.option("--seed", default=0, show_default=True, help="Shuffle seed.")
@log_options
@user_errors
def demo(
    urls: tuple[str, ...], tokenizer: str, seq_len: int, batch_size: int, batches: int, seed: int, quiet: bool
) -> None:
    """Stream packed batches of the shipped corpus on the fly and print them decoded.

    It also saves the stream's state after the first batch, resumes a fresh iterator from
    it, and checks that the resumed stream continues exactly where the first left off (exit
    status 1 if not). The corpus and tokenizer ship inside the package, so it runs from any
    directory after ``pip install beamtok``.
    """
    from beamtok import Dataset, load_tokenizer

    tok = load_tokenizer(tokenizer)
    ds = (
        Dataset.from_files(list(urls))
        .tokenize(tok)
        .ensure_bos_eos()
        .concat_chunk(seq_len)
        .shuffle(window=256, seed=seed)
        .batch(batch_size)
    )
    click.echo(f"{ds!r}\ntokenizer: {tok!r}\nengine: {tok.engine}\n")
    started = time.perf_counter()
    it = ds.iter()
    first = next(it)
    state = json.loads(json.dumps(it.state_dict()))
    shown = [first, *[b for _, b in zip(range(batches - 1), it)]]
    for b, batch in enumerate(shown):
        for row in range(len(batch["input_ids"])):
            where = f"shard {batch['shard'][row]} example {batch['index'][row]} (doc {batch['doc'][row]}, token {batch['token'][row]})"
            segments = len(set(batch["segment_ids"][row].tolist()) - {0})
            click.echo(f"--- batch {b} row {row}: {where}, {segments} document(s) ---")
            click.echo(tok.decode(batch["input_ids"][row]))
    resumed = ds.iter(state)
    same = all((next(resumed)["input_ids"] == b["input_ids"]).all() for b in shown[1:])
    click.echo(f"\nstate after batch 0: {len(json.dumps(state))} bytes of JSON; resumed stream identical: {same}")
    click.echo(f"stats: {json.dumps(it.stats())}  ({time.perf_counter() - started:.2f}s)")
    if not same:
        raise SystemExit(1)

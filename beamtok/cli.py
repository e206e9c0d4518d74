"""The ``beamtok`` command line.

User errors (bad options, unreadable input, mismatched states) print one line, prefixed
``beamtok: error:``, and exit with status 2; they never show a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from beamtok.errors import BeamtokError

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])

DEMO_DATA = "data/corpus/shakespeare-{00..03}.jsonl"
DEMO_TOKENIZER = "data/tokenizers/gpt2"


def user_errors(fn: F) -> F:
    """Turn BeamtokError into a one-line message and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BeamtokError as e:
            click.echo(f"beamtok: error: {e}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="beamtok")
def main() -> None:
    """Tokenize and pack LLM training data, on the fly or through a Beam-built cache."""


@main.command()
@click.option("--data", "urls", multiple=True, default=[DEMO_DATA], show_default=True, help="Input URL patterns.")
@click.option("--tokenizer", default=DEMO_TOKENIZER, show_default=True, help="Tokenizer directory or hub name.")
@click.option("--seq-len", default=64, show_default=True, help="Tokens per packed row.")
@click.option("--batch-size", default=2, show_default=True)
@click.option("--batches", default=2, show_default=True, help="How many batches to print.")
@click.option("--seed", default=0, show_default=True, help="Shuffle seed.")
@user_errors
def demo(urls: tuple[str, ...], tokenizer: str, seq_len: int, batch_size: int, batches: int, seed: int) -> None:
    """Stream packed batches of the shipped corpus on the fly and print them decoded.

    It also saves the stream's state after the first batch, resumes a fresh iterator from
    it, and checks that the resumed stream continues exactly where the first left off.
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
    click.echo(f"{ds!r}\ntokenizer: {tok!r}\n")
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
    resumed = ds.iter(state_dict=state)
    same = all((next(resumed)["input_ids"] == b["input_ids"]).all() for b in shown[1:])
    click.echo(f"\nstate after batch 0: {len(json.dumps(state))} bytes of JSON; resumed stream identical: {same}")
    click.echo(f"stats: {json.dumps(it.stats())}  ({time.perf_counter() - started:.2f}s)")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

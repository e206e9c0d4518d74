"""``beamtok head``: a few batches of a cache, decoded piece by piece."""

from __future__ import annotations

import json

import click

from beamtok._src.cli.app import log_options, main, user_errors

__all__ = ["head"]


@main.command()
@click.argument("directory")
@click.option("--batch-size", default=2, show_default=True)
@click.option("--batches", default=2, show_default=True)
@click.option("--seed", default=0, show_default=True, help="Shuffle seed.")
@click.option("--no-shuffle", is_flag=True, help="Rows in cache order (shard 0 first) instead of shuffled.")
@click.option(
    "--max-chars",
    type=int,
    default=500,
    show_default=True,
    help="Cut each piece's text after this many characters (0: never).",
)
@click.option("--ids", is_flag=True, help="Show each piece's token ids.")
@click.option("--mask", is_flag=True, help="Mark tokens that are not trained on (loss_mask 0) as «...».")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row (then one with the stats).")
@log_options
@user_errors
def head(
    directory: str,
    batch_size: int,
    batches: int,
    seed: int,
    no_shuffle: bool,
    max_chars: int,
    ids: bool,
    mask: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Print a few batches of a cache, decoded: each row split into its pieces (where
    documents or examples begin), optionally with token ids and the loss mask."""
    from beamtok import Dataset
    from beamtok._src.base.validate import check_int
    from beamtok._src.cache.read.reader import Cache
    from beamtok._src.cli.row_pieces import row_pieces

    check_int(batch_size, "--batch-size", minimum=1)
    check_int(batches, "--batches", minimum=1)
    check_int(max_chars, "--max-chars", minimum=0)
    limit = max_chars or None
    cache = Cache(directory)
    tok = cache.tokenizer()
    pack = cache.manifest.spec.get("pack")
    ds = Dataset.from_cache(directory)
    ds = (ds if no_shuffle else ds.shuffle(window=256, seed=seed)).batch(batch_size)
    it = ds.iter()
    for b, batch in zip(range(batches), it):
        for row in range(len(batch["input_ids"])):
            example = {name: values[row] for name, values in batch.items()}
            pieces = row_pieces(example, tok.decode, max_chars=limit, mask=mask, pack=pack)
            where = {"batch": b, "row": row, **{k: int(example[k]) for k in ("shard", "index", "doc", "token")}}
            if as_json:
                click.echo(json.dumps({**where, "pieces": [p.to_json(ids=ids) for p in pieces]}))
                continue
            click.echo(
                f"--- batch {b} row {row}: shard {where['shard']} example {where['index']}, {len(pieces)} piece(s) ---"
            )
            for p in pieces:
                click.echo(f"[{p.describe()}]")
                click.echo(p.text)
                if ids:
                    click.echo(f"ids: {p.ids}")
    stats = it.stats()
    if as_json:
        click.echo(json.dumps({"stats": stats}))
    else:
        delivered = stats["delivered"]
        click.echo(
            f"\ndelivered: {delivered['examples']} rows, {delivered['tokens']:,} tokens, {delivered['pad_tokens']:,} padding; "
            f"read from the cache (the shuffle window reads ahead): {stats['examples']} rows, {stats['tokens']:,} tokens"
        )

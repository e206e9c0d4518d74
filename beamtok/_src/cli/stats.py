"""``beamtok stats``: what a cache or input files hold, with distributions and histograms."""

from __future__ import annotations

import json
import os

import click

from beamtok._src.cli.app import is_cache, log_options, main, user_errors
from beamtok._src.cli.cache import named_chat_template_option

__all__ = ["stats"]


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--tokenizer", help="Tokenizer for input files (a cache brings its own).")
@click.option("--documents", default=1000, show_default=True, help="Input files: documents read from each file.")
@click.option("--limit", type=int, help="Cache: rows read for the distributions. [default: all]")
@click.option(
    "--records",
    "--format",
    "records",
    type=click.Choice(["pretrain", "sft", "chat"]),
    default="pretrain",
    show_default=True,
    help="Input files: what the records hold, as for beamtok cache (older name: --format).",
)
@click.option("--text-field", default="text", show_default=True, help="Input files: the text field.")
@click.option("--prompt-field", default="prompt", show_default=True)
@click.option("--completion-field", default="completion", show_default=True)
@click.option("--messages-field", default="messages", show_default=True)
@click.option(
    "--chat-template", help="Input files, --records chat: Jinja chat template file (default: the tokenizer's)."
)
@click.option(
    "--input-format",
    type=click.Choice(["auto", "jsonl", "parquet", "arrow", "text"]),
    default="auto",
    show_default=True,
)
@click.option(
    "--on-error",
    type=click.Choice(["raise", "skip"]),
    default="skip",
    show_default=True,
    help="Input files: bad documents.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write histograms to this PNG file.")
@log_options
@user_errors
def stats(
    paths: tuple[str, ...],
    tokenizer: str | None,
    documents: int,
    limit: int | None,
    records: str,
    text_field: str,
    prompt_field: str,
    completion_field: str,
    messages_field: str,
    chat_template: str | None,
    input_format: str,
    on_error: str,
    as_json: bool,
    plot: str | None,
    quiet: bool,
) -> None:
    """What is in a cache directory, or in input files (tokenized on the fly; needs
    --tokenizer): documents, tokens, rows, padding, skipped documents by reason, SFT prompt and
    completion lengths, distributions (percentiles) and a per-shard table."""
    from beamtok._src.base.errors import ConfigError
    from beamtok._src.base.validate import check_int
    from beamtok._src.cli.data_stats import cache_stats, describe_stats, files_stats

    check_int(documents, "--documents", minimum=1)
    if limit is not None:
        check_int(limit, "--limit", minimum=1)
    if (
        len(paths) == 1
        and "://" not in paths[0]
        and not any(c in paths[0] for c in "*?[{")
        and not os.path.exists(paths[0])
    ):
        from beamtok._src.sources.urls import nearest_name

        raise ConfigError(f"{paths[0]}: no such file or directory{nearest_name(paths[0])}")
    if len(paths) == 1 and is_cache(paths[0]):
        if tokenizer is not None:
            raise ConfigError(f"{paths[0]} is a cache: it brings its own tokenizer (drop --tokenizer)")
        summary, gathered = cache_stats(paths[0], limit=limit)
    else:
        if tokenizer is None:
            raise ConfigError("input files need --tokenizer (or give one cache directory)")
        from beamtok import Dataset

        ds = Dataset.from_files(list(paths), format=input_format, text_field=text_field, on_error=on_error)
        if records == "sft":
            ds = ds.tokenize_sft(tokenizer, prompt=prompt_field, completion=completion_field)
        elif records == "chat":
            ds = named_chat_template_option(ds.tokenize_chat)(
                tokenizer, template=chat_template, messages=messages_field
            )
        else:
            ds = ds.tokenize(tokenizer).ensure_bos_eos()
        summary, gathered = files_stats(ds, documents=documents)
        from beamtok import load_tokenizer

        tok = load_tokenizer(tokenizer)
        summary["tokenizer_engine"] = tok.engine
        summary["tokenizer_engine_choice"] = tok.engine_choice.to_json()
    if plot is not None:
        from beamtok._src.cli.plots import plot_stats

        summary["plot"] = {
            "path": plot,
            "panels": plot_stats(gathered, plot, title=f"beamtok stats: {' '.join(paths)}"),
        }
    if as_json:
        click.echo(json.dumps(summary, indent=1))
    else:
        click.echo(describe_stats(summary))
        if plot is not None:
            click.echo(f"histograms: {plot}")

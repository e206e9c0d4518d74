"""``beamtok cache``: build (or complete) a Parquet cache with Apache Beam, from options of
the one cache-option table (``beamtok._src.core.cache_options``), a YAML file of them, or a data config."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from beamtok._src.cli.app import log_options, main, user_errors
from beamtok._src.cli.beam_logs import quiet_beam_logs
from beamtok._src.cli.interrupt import interrupted_build
from beamtok._src.cli.job_request import show_job_request
from beamtok._src.core.cache_options import BUILD_SETTINGS, CACHE_OPTIONS, defaults, names, with_option_names

__all__ = ["cache", "load_cache_config", "named_chat_template_option"]

F = TypeVar("F", bound=Callable[..., Any])

CACHE_KEYS = names("input", "dataset", "build")  # what a --config YAML file may set
CACHE_DEFAULTS = defaults("input", "dataset", "build")


def build_cache_dataset(options: dict[str, Any]) -> Any:
    """The on-the-fly dataset whose shard processing the cache stores."""
    from beamtok._src.base.errors import ConfigError
    from beamtok._src.dataset.options import dataset_from_options, on_the_command_line

    if not options.get("output"):
        raise ConfigError("missing --output")
    return named_chat_template_option(dataset_from_options)(options, on_the_command_line)


def cache_options(fn: F) -> F:
    """The command-line options of every command-line entry of the table."""
    for option in reversed([o for o in CACHE_OPTIONS if o.command_line]):
        names_ = [option.cli_name, *("--" + a.replace("_", "-") for a in option.aliases), option.name] + (
            ["-o"] if option.name == "output" else []
        )
        if option.switch:
            decorator = click.option(f"{option.cli_name}/--no-{option.cli_name[2:]}", default=None, help=option.help)
        elif option.flag:
            decorator = click.option(*names_, is_flag=True, default=None, help=option.help)
        elif option.choices is not None:
            decorator = click.option(*names_, type=click.Choice(list(option.choices)), help=option.help)
        else:
            decorator = click.option(*names_, type=option.type, help=option.help)
        fn = decorator(fn)
    return fn


def load_cache_config(path: str | None) -> dict[str, Any]:
    """Options from a YAML file: the long option names (dashes or underscores), plus
    ``beam_options`` as a mapping or a list of ``--name=value`` strings."""
    if path is None:
        return {}
    from beamtok._src.base.errors import ConfigError
    from beamtok._src.dataset.config import read_yaml

    data = read_yaml(path, "config")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a mapping of option names to values")
    config = with_option_names({str(k).replace("-", "_"): v for k, v in data.items()}, path)
    unknown = sorted(set(config) - set(CACHE_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown option(s) {unknown}; known: {list(CACHE_KEYS)}")
    if isinstance(config.get("urls"), str):
        config["urls"] = [config["urls"]]
    beam_options = config.get("beam_options", [])
    if isinstance(beam_options, dict):
        from beamtok._src.core.cache_options import beam_args

        config["beam_options"] = beam_args(beam_options)
    elif not isinstance(beam_options, list):
        raise ConfigError(f"{path}: beam_options must be a mapping or a list of --name=value strings")
    return config


def named_chat_template_option(fn: F) -> F:
    """``fn`` whose missing-chat-template error names the command-line option."""
    from beamtok._src.transforms.sft import NoChatTemplate

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except NoChatTemplate as e:
            raise NoChatTemplate(e.tokenizer_name, "--chat-template FILE (a Jinja template)") from None

    return wrapper  # type: ignore[return-value]


def _is_data_config(path: str) -> bool:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return False  # load_cache_config reports it
    return isinstance(data, dict) and "datasets" in data


def written_as(build: dict[str, Any]) -> dict[str, Any]:
    """``run_cache``'s keywords for how a cache is written, from build options (the table's
    names; ``split_bytes`` as typed or already parsed)."""
    from beamtok._src.cache.build.ranges import split_bytes_option

    return {
        "overwrite": build["overwrite"],
        "row_group_rows": build.get("row_group_rows"),
        "row_group_bytes": build.get("row_group_bytes"),
        "parquet_compat": build["parquet_compat"],
        "split_bytes": split_bytes_option(build.get("split_bytes")),
    }


def _cache_data_config(path: str, flags: dict[str, Any], beam_args: list[str], quiet: bool) -> None:
    """Build the cache of every dataset of a data config that names one, with the build options
    the config gives it; ``flags`` (build options from the command line) override them."""
    from beamtok._src.beam.worker_server import start_early
    from beamtok._src.core.spec import tokenizers_to_warm

    start_early(beam_args)  # kept for every dataset's build
    from beamtok._src.base.errors import ConfigError
    from beamtok._src.beam.run import run_cache
    from beamtok._src.dataset.config import load_config

    config = load_config(path)
    if not config.caches:
        raise ConfigError(f"{path}: no dataset names a cache directory (cache: DIR)")
    for name, directory in config.caches.items():
        ds = config.datasets[name]
        build = {**config.builds[name], **flags}
        dataset_beam_args = [*build["beam_options"], *beam_args]
        start_early(
            dataset_beam_args, functools.partial(tokenizers_to_warm, ds.spec)
        )  # the server loads this dataset's tokenizers for its workers
        started = time.perf_counter()
        with interrupted_build(directory):
            manifest = run_cache(
                ds.spec,
                ds.shards,
                directory,
                dataset_beam_args,
                progress=not quiet,
                **written_as(build),
            )
        totals = manifest.totals
        click.echo(
            f"{name}: cache {directory}: {totals['shards']} shards, {totals['rows']:,} rows, {totals['tokens']:,} tokens "
            f"({time.perf_counter() - started:.1f}s), spec {manifest.fingerprint}"
        )


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("urls", nargs=-1)
@cache_options
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="YAML file with any of these options, or a data config (datasets: ...): builds every cache it names.",
)
@log_options
@click.pass_context
@user_errors
def cache(ctx: click.Context, urls: tuple[str, ...], config_path: str | None, quiet: bool, **flags: Any) -> None:
    """Tokenize and pack URLS into a Parquet cache with Apache Beam.

    \b
    URLS are files or patterns: train.{00..31}.jsonl.gz, data/*.parquet, s3://bucket/x.jsonl.
    Every other option is passed to Beam as a pipeline option; write them as --name=value:
      --runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp
      --direct_running_mode=multi_processing --direct_num_workers=2
    Local runs (no --runner, or DirectRunner) use Beam's FnApiRunner and never touch the
    network. Re-running completes an unfinished cache and skips finished shards.

    \b
    Example:
      beamtok cache 'data/corpus/shakespeare-{00..03}.jsonl' --output build/cache \\
          --tokenizer data/tokenizers/gpt2 --seq-len 1024
    """
    from beamtok._src.base.extras import require

    require("beamtok cache", "apache_beam")
    from beamtok._src.base.errors import ConfigError
    from beamtok._src.beam.options import check_beam_args, split_command_line

    if config_path is not None and _is_data_config(config_path):
        own = [name for param in ctx.command.params for name in param.opts if name.startswith("-")]
        positional, passthrough = split_command_line([*urls, *ctx.args], own)
        given = {name: value for name, value in flags.items() if value is not None and value is not False}
        build = {name: value for name, value in given.items() if name in BUILD_SETTINGS}
        dataset_flags = [f"--{name.replace('_', '-')}" for name in given if name not in build] + (
            ["URLS"] if positional else []
        )
        if dataset_flags:
            raise ConfigError(
                f"{config_path} is a data config: it names every dataset's options; drop {', '.join(sorted(dataset_flags))} "
                "(build options such as --row-group-rows or --parquet-compat apply to every cache it names)"
            )
        if "split_bytes" in build:
            from beamtok._src.cache.build.ranges import split_bytes_option

            build["split_bytes"] = split_bytes_option(build["split_bytes"])
        _cache_data_config(config_path, build, passthrough, quiet)
        return
    options = {**CACHE_DEFAULTS, **load_cache_config(config_path)}
    options.update({k: v for k, v in flags.items() if v is not None})
    if options.get("megatron"):  # documents whole, an EOD after each, as Megatron's preprocess_data.py --append-eod
        if options.get("pack") is None:
            options["pack"] = "none"
        options["bos"] = bool(flags.get("bos"))
    output = options.get("output")
    if output and ("://" not in output or output.startswith("file://")):
        # a local output's lock is read before Beam's import and the tokenizer's load; a remote
        # one is checked when the build takes it (a dry run for Dataflow must not reach a bucket)
        from beamtok._src.cache.build.lock import refuse_if_building

        refuse_if_building(output)
    # Options click does not know land among the URLs, in command-line order; Beam's parser
    # decides which are its options (and which next token is an option's value).
    own = [name for param in ctx.command.params for name in param.opts if name.startswith("-")]
    positional, passthrough = split_command_line([*urls, *ctx.args], own)
    if positional or "urls" not in options:
        options["urls"] = positional
    configured = check_beam_args(options["beam_options"], where=f"{config_path}: beam_options: ")
    beam_args = [*configured, *passthrough]
    from beamtok._src.beam.worker_server import start_early
    from beamtok._src.core.spec import tokenizers_to_warm

    start_early(beam_args)  # local worker processes import Beam while this process loads the tokenizer, then Beam
    ds = build_cache_dataset(options)
    start_early(beam_args, lambda: tokenizers_to_warm(ds.spec))  # and load the tokenizers before they fork
    quiet_beam_logs()
    from beamtok._src.beam.dry_run import is_dry_run

    if is_dry_run(beam_args):
        show_job_request(ds, options, beam_args)
        return
    if options.get("megatron"):
        _write_megatron(ds, options["output"], beam_args, quiet)
        return
    from beamtok._src.beam.run import run_cache

    started = time.perf_counter()
    counters: dict[str, int] = {}
    with interrupted_build(options["output"]):
        manifest = run_cache(
            ds.spec,
            ds.shards,
            options["output"],
            beam_args,
            progress=not quiet,
            on_counters=counters.update,
            **written_as(options),
        )
    totals = manifest.totals
    seconds = time.perf_counter() - started
    click.echo(
        f"cache {options['output']}: {totals['shards']} shards, {totals['rows']:,} rows, {totals['tokens']:,} tokens "
        f"({totals['tokens'] / seconds / 1e6:.2f}M tokens/s), documents {json.dumps(totals['documents'])}, spec {manifest.fingerprint}"
    )
    if counters and not quiet:
        shown = (
            "shards_written",
            "shards_reused",
            "split_shards",
            "ranges",
            "pack_tasks",
            "documents",
            "skipped_documents",
            "examples",
            "tokens",
        )
        click.echo("Beam counters: " + ", ".join(f"{name} {counters.get(name, 0):,}" for name in shown))
    elif not quiet:  # a runner that reports no metrics (Dask): the same figures, from the manifest
        documents = totals["documents"]
        click.echo(
            f"counters (from the manifest; the runner reports no Beam counters): shards {totals['shards']:,}, "
            f"documents {documents['read']:,}, skipped_documents {sum(documents['skipped'].values()):,}, "
            f"examples {totals['rows']:,}, tokens {totals['tokens']:,}"
        )


def _write_megatron(ds: Any, prefix: str, beam_args: list[str], quiet: bool) -> None:
    """``beamtok cache --megatron``: ``Dataset.to_megatron(prefix)`` with these Beam options."""
    options: dict[str, Any] = {}
    for arg in beam_args:
        name, has_value, value = arg[2:].partition("=")
        options[name] = value if has_value else True
    written = ds.to_megatron(prefix, **options)
    if not quiet:
        click.echo(
            f"megatron {prefix}: {written['documents']:,} documents, {written['tokens']:,} tokens as {written['dtype']} "
            f"({', '.join(written['files'])})"
        )

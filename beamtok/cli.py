"""The ``beamtok`` command line.

User errors (bad options, unreadable input, mismatched states) print one line, prefixed
``beamtok: error:``, and exit with status 2; they never show a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from beamtok.errors import BeamtokError

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])

DEMO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo")  # shipped inside the package
DEMO_DATA = os.path.join(DEMO_DIR, "corpus", "shakespeare-{04..05}.jsonl.gz")
DEMO_TOKENIZER = os.path.join(DEMO_DIR, "gpt2")


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def configure_logging(verbose: int, quiet: bool, log_level: str | None) -> None:
    """beamtok's messages at INFO (WARNING with -q, DEBUG with -v); Beam's at ERROR (WARNING
    with -v, INFO with -vv); ``--log-level`` sets both."""
    from beamtok.errors import ConfigError

    if quiet and (verbose or log_level):
        raise ConfigError("-q cannot be combined with -v or --log-level")
    ours = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    beams = (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 3)]
    if log_level is not None:
        ours = beams = getattr(logging, log_level.upper())
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("beamtok: %(message)s"))
    logger = logging.getLogger("beamtok")
    logger.handlers = [handler]
    logger.setLevel(ours)
    logger.propagate = False
    beam_handler = _StderrHandler()
    beam_handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
    beam = logging.getLogger("apache_beam")
    beam.handlers = [beam_handler]
    beam.setLevel(beams)
    beam.propagate = False


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (tests swap it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def log_options(fn: F) -> F:
    """``--log-level``, ``-v`` and ``-q`` on a command; logging is set up before it runs."""

    @click.option("--log-level", type=click.Choice(LEVELS, case_sensitive=False), help="Level of beamtok's and Beam's log messages.")
    @click.option("--verbose", "-v", count=True, help="More messages: -v beamtok's debug and Beam's warnings, -vv Beam's info.")
    @click.option("--quiet", "-q", is_flag=True, help="Warnings and errors only; no progress display.")
    @functools.wraps(fn)
    def wrapper(*args: Any, log_level: str | None, verbose: int, quiet: bool, **kwargs: Any) -> Any:
        try:
            configure_logging(verbose, quiet, log_level)
        except BeamtokError as e:
            click.echo(f"beamtok: error: {e}", err=True)
            sys.exit(2)
        return fn(*args, quiet=quiet, **kwargs)

    return wrapper  # type: ignore[return-value]


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
@click.option("--data", "urls", multiple=True, default=[DEMO_DATA], help="Input URL patterns. [default: Shakespeare shipped with beamtok]")
@click.option("--tokenizer", default=DEMO_TOKENIZER, help="Tokenizer directory or hub name. [default: GPT-2 shipped with beamtok]")
@click.option("--seq-len", default=64, show_default=True, help="Tokens per packed row.")
@click.option("--batch-size", default=2, show_default=True)
@click.option("--batches", default=2, show_default=True, help="How many batches to print.")
@click.option("--seed", default=0, show_default=True, help="Shuffle seed.")
@log_options
@user_errors
def demo(urls: tuple[str, ...], tokenizer: str, seq_len: int, batch_size: int, batches: int, seed: int, quiet: bool) -> None:
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
    resumed = ds.iter(state_dict=state)
    same = all((next(resumed)["input_ids"] == b["input_ids"]).all() for b in shown[1:])
    click.echo(f"\nstate after batch 0: {len(json.dumps(state))} bytes of JSON; resumed stream identical: {same}")
    click.echo(f"stats: {json.dumps(it.stats())}  ({time.perf_counter() - started:.2f}s)")
    if not same:
        raise SystemExit(1)


CACHE_KEYS = (
    "urls", "output", "tokenizer", "seq_len", "pack", "stride", "remainder", "pack_window", "text_field",
    "input_format", "format", "prompt_field", "completion_field", "messages_field", "chat_template",
    "max_length", "truncation", "bos", "eos", "on_error", "overwrite", "row_group_rows", "row_group_bytes",
    "split_bytes", "beam_options",
)  # fmt: skip
CACHE_DEFAULTS: dict[str, Any] = {
    "remainder": "pad", "pack_window": 64, "text_field": "text", "input_format": "auto", "format": "pretrain",
    "prompt_field": "prompt", "completion_field": "completion", "messages_field": "messages",
    "truncation": "completion_tail", "on_error": "raise", "overwrite": False, "split_bytes": "16MiB", "beam_options": [],
}  # fmt: skip


BEAM_LOGGERS = (
    "",
    "apache_beam.runners.common",
    "apache_beam.runners.worker.sdk_worker",
    "apache_beam.runners.worker.bundle_processor",
    "apache_beam.runners.portability.fn_api_runner.fn_runner",
    "apache_beam.runners.portability.fn_api_runner.worker_handlers",
)


def _quiet_beam_logs(record: logging.LogRecord) -> bool:
    """Drop Beam's logged traceback of a user error, which the CLI reports in one line itself."""
    from beamtok.cache.build import out_of_room

    error = record.exc_info[1] if record.exc_info else None
    if error is not None and out_of_room(error) is not None:
        return False  # reported in one line as a CacheError
    return not (isinstance(error, BeamtokError) or "beamtok.errors." in (record.exc_text or "") or _names_user_error(record))


def _names_user_error(record: logging.LogRecord) -> bool:
    # Beam logs a DoFn's failure with the traceback as text; a user error's class is in it.
    return record.name.startswith("apache_beam") and any(
        f"beamtok.errors.{name}" in record.getMessage() for name in ("InputError", "ConfigError", "CacheError", "StateError")
    )


def load_cache_config(path: str | None) -> dict[str, Any]:
    """Options from a YAML file: the long option names (dashes or underscores), plus
    ``beam_options`` as a mapping or a list of ``--name=value`` strings."""
    if path is None:
        return {}
    import yaml

    from beamtok.errors import ConfigError

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a mapping of option names to values")
    config = {str(k).replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(config) - set(CACHE_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown option(s) {unknown}; known: {list(CACHE_KEYS)}")
    if isinstance(config.get("urls"), str):
        config["urls"] = [config["urls"]]
    beam_options = config.get("beam_options", [])
    if isinstance(beam_options, dict):
        from beamtok.stream.dataset import beam_args

        config["beam_options"] = beam_args(beam_options)
    elif not isinstance(beam_options, list):
        raise ConfigError(f"{path}: beam_options must be a mapping or a list of --name=value strings")
    return config


def _on_the_command_line(fn: F) -> F:
    """``fn`` whose missing-chat-template error names the command-line option."""
    from beamtok.transforms.sft import NoChatTemplate

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


def _cache_data_config(path: str, beam_args: list[str], quiet: bool) -> None:
    """Build the cache of every dataset of a data config that names one."""
    from beamtok.cache.build import run_cache
    from beamtok.data_config import load_config
    from beamtok.errors import ConfigError

    config = load_config(path)
    if not config.caches:
        raise ConfigError(f"{path}: no dataset names a cache directory (cache: DIR)")
    for name, directory in config.caches.items():
        ds = config.datasets[name]
        started = time.perf_counter()
        with _interrupted_build(directory):
            manifest = run_cache(ds.spec, ds.shards, directory, beam_args, progress=not quiet)
        totals = manifest.totals
        click.echo(
            f"{name}: cache {directory}: {totals['shards']} shards, {totals['rows']:,} rows, {totals['tokens']:,} tokens "
            f"({time.perf_counter() - started:.1f}s), spec {manifest.fingerprint}"
        )


@contextlib.contextmanager
def _interrupted_build(output: str) -> Iterator[None]:
    """Ctrl-C during a build: one line saying what state the cache is in, exit status 130.

    Left to Beam, the interrupt surfaces inside a DoFn, is logged with its traceback and
    re-raised as a RuntimeError while worker threads keep the process alive, and the local
    worker processes (in the terminal's process group) print tracebacks of their own. So a
    thread watches the signal wakeup descriptor (whichever thread the signal lands on): it
    silences the workers' output, releases the build lock, prints the line and ends the
    process at once."""
    import signal
    import threading

    from beamtok.beam.worker_logs import mute_workers
    from beamtok.cache.lock import release_held_locks

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    message = (
        f"\nbeamtok: interrupted: the cache {output} is unfinished; re-run the same command to complete it "
        "(finished shards are kept)\n"
    ).encode()
    stderr = os.dup(2)  # the terminal's: a local build points descriptor 2 at its log filter
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)

    def watch() -> None:
        while True:
            try:
                data = os.read(wake_read, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGINT in data:
                mute_workers()
                release_held_locks()
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                os.write(stderr, message)
                os._exit(130)

    previous_handler = signal.signal(signal.SIGINT, lambda *_: None)  # the watcher acts
    previous_fd = signal.set_wakeup_fd(wake_write)
    watcher = threading.Thread(target=watch, name="beamtok-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous_handler)
        os.close(wake_write)  # the watcher reads end-of-file and returns
        watcher.join(timeout=5)
        os.close(wake_read)
        os.close(stderr)


def _show_job_plan(ds: Any, options: dict[str, Any], beam_args: list[str]) -> None:
    """Build the job request of a remote build without submitting it, and describe it."""
    from beamtok.beam.dry_run import plan_job
    from beamtok.cache.ranges import split_bytes_option

    plan = plan_job(
        ds.spec,
        ds.shards,
        options["output"],
        beam_args,
        split_bytes=split_bytes_option(options.get("split_bytes")),
        row_group_rows=options.get("row_group_rows"),
        row_group_bytes=options.get("row_group_bytes"),
    )
    click.echo(f"dry run: {plan.runner} job {plan.job_name} built and checked, not submitted; {options['output']} untouched")
    click.echo(f"  {len(ds.shards)} input files, spec {ds.spec_fingerprint}")
    click.echo(f"  steps: {', '.join(step.removeprefix('BuildCache/') for step in plan.steps)}")
    click.echo(f"  worker image: {plan.container_image}")
    click.echo(f"  packages the workers install: {', '.join(plan.packages) or 'none'}")
    click.echo(
        f"  tokenizer: {plan.tokenizer_bytes / 1e6:.1f} MB serialized, written to {options['output']}/tokenizer.json when the job "
        "is submitted and read from there by the workers: they need no path of this machine"
    )
    click.echo(f"  job graph: {plan.graph_bytes / 1e6:.2f} MB (Dataflow takes requests up to 10 MB)")
    if plan.job_file:
        click.echo(f"  job graph written to {plan.job_file}")


def build_cache_dataset(options: dict[str, Any]) -> Any:
    """The on-the-fly dataset whose per-shard step the cache stores."""
    from beamtok.errors import ConfigError

    if options.get("hf_dataset") and options.get("mds"):
        raise ConfigError("pass either --hf-dataset or --mds, not both")
    if options.get("hf_dataset"):
        if options.get("urls"):
            raise ConfigError("pass either URL arguments or --hf-dataset, not both")
        from beamtok.sources.hf_files import hf_dataset_files

        found = hf_dataset_files(options["hf_dataset"], split=options.get("split") or "train", config=options.get("hf_config"))
        options = {**options, "urls": found.urls, "input_format": found.format}
    elif options.get("mds"):
        if options.get("urls"):
            raise ConfigError("pass either URL arguments or --mds, not both")
        if options.get("hf_config"):
            raise ConfigError("--hf-config applies to --hf-dataset only")
        from beamtok.sources.mds import mds_shard_urls

        options = {**options, "urls": mds_shard_urls(options["mds"], split=options.get("split")), "input_format": "mds"}
    elif options.get("split") or options.get("hf_config"):
        raise ConfigError("--split applies to --hf-dataset and --mds only, --hf-config to --hf-dataset only")
    for required in ("urls", "output", "tokenizer"):
        if not options.get(required):
            raise ConfigError(f"missing {'URL arguments (or --hf-dataset / --mds)' if required == 'urls' else '--' + required.replace('_', '-')}")
    kind = options["format"]
    if kind not in ("pretrain", "sft", "chat"):
        raise ConfigError(f"--format must be pretrain, sft or chat, got {kind!r}")
    pack = options.get("pack") or ("concat" if kind == "pretrain" else "greedy")
    if pack != "none" and options.get("seq_len") is None:
        raise ConfigError(f"--seq-len is required with --pack {pack}")
    from beamtok.data_config import dataset_from_options

    return _on_the_command_line(dataset_from_options)(options)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("urls", nargs=-1)
@click.option("--output", "-o", help="Cache directory (local path, gs://... or s3://...).")
@click.option("--tokenizer", help="Tokenizer directory or hub name.")
@click.option("--seq-len", type=int, help="Tokens per row (concat, pad, window).")
@click.option("--format", "format_", type=click.Choice(["pretrain", "sft", "chat"]), help="Records: text, prompt/completion, or chat messages. [default: pretrain]")
@click.option("--pack", type=click.Choice(["concat", "pad", "window", "none", "greedy", "first_fit"]), help="Packing. [default: concat for pretrain, greedy for sft/chat]")
@click.option("--stride", type=int, help="Window stride for --pack window. [default: seq-len]")
@click.option("--remainder", type=click.Choice(["pad", "drop", "keep"]), help="A shard's last partial concat row. [default: pad]")
@click.option("--pack-window", type=int, help="Examples per first_fit packing window. [default: 64]")
@click.option("--text-field", help="JSON field / Parquet column holding the text. [default: text]")
@click.option("--prompt-field", help="SFT prompt field. [default: prompt]")
@click.option("--completion-field", help="SFT completion field ('generation' is accepted too). [default: completion]")
@click.option("--messages-field", help="Chat messages field. [default: messages]")
@click.option("--chat-template", help="Jinja chat template file (default: the tokenizer's).")
@click.option("--max-length", type=int, help="SFT/chat examples longer than this are truncated or dropped.")
@click.option("--truncation", type=click.Choice(["completion_tail", "prompt_head", "drop"]), help="How too-long SFT/chat examples are cut. [default: completion_tail]")
@click.option("--hf-dataset", help="Read a Hugging Face dataset instead of URLS: a save_to_disk directory, a directory of data files, or a hub name (online).")
@click.option("--hf-config", help="The hub dataset's configuration (with --hf-dataset).")
@click.option("--mds", help="Read a MosaicML Streaming (MDS) dataset instead of URLS: its directory or index.json, local or remote.")
@click.option("--split", help="The split to cache: with --hf-dataset [default: train], or the MDS dataset's split subdirectory.")
@click.option("--input-format", type=click.Choice(["auto", "jsonl", "parquet", "arrow", "text", "mds"]), help="Input file format. [default: auto, from the file name]")
@click.option("--bos/--no-bos", default=None, help="BOS at the start of each document/example. [default: on for pretrain; the tokenizer's policy for sft/chat]")
@click.option("--eos/--no-eos", default=None, help="Ensure each pretraining document ends with EOS. [default: on]")
@click.option("--on-error", type=click.Choice(["raise", "skip"]), help="Bad documents: stop, or skip and count. [default: raise]")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="YAML file with any of these options, or a data config (datasets: ...): builds every cache it names.")
@click.option("--overwrite", is_flag=True, default=None, help="Replace a cache built with another spec.")
@click.option("--row-group-rows", type=int, help="Rows per Parquet row group (small groups: cheaper random access).")
@click.option("--row-group-bytes", type=int, help="Bytes of tokens per Parquet row group. [default: 8388608]")
@click.option("--split-bytes", help="Tokenize input files larger than this in ranges on several workers (uncompressed JSONL, Parquet); 'none' never splits. The cache is the same. [default: 16MiB]")
@log_options
@click.pass_context
@user_errors
def cache(ctx: click.Context, urls: tuple[str, ...], config_path: str | None, quiet: bool, format_: str | None, **flags: Any) -> None:
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
    from beamtok.beam.options import check_beam_args, split_command_line
    from beamtok.errors import ConfigError

    if config_path is not None and _is_data_config(config_path):
        own = [name for param in ctx.command.params for name in param.opts if name.startswith("-")]
        positional, passthrough = split_command_line([*urls, *ctx.args], own)
        given = [name for name, value in flags.items() if value is not None] + (["URLS"] if positional else []) + (["--format"] if format_ else [])
        if given:
            raise ConfigError(f"{config_path} is a data config: it names every dataset's options; drop {', '.join(sorted(given))}")
        _cache_data_config(config_path, passthrough, quiet)
        return
    options = {**CACHE_DEFAULTS, **load_cache_config(config_path)}
    flags["format"] = format_
    options.update({k: v for k, v in flags.items() if v is not None})
    # Options click does not know land among the URLs, in command-line order; Beam's parser
    # decides which are its options (and which next token is an option's value).
    own = [name for param in ctx.command.params for name in param.opts if name.startswith("-")]
    positional, passthrough = split_command_line([*urls, *ctx.args], own)
    if positional or "urls" not in options:
        options["urls"] = positional
    configured = check_beam_args(options["beam_options"], where=f"{config_path}: beam_options: ")
    ds = build_cache_dataset(options)
    beam_args = [*configured, *passthrough]
    for name in BEAM_LOGGERS:  # a logger's filters see only records logged on it, not its children's
        logging.getLogger(name).addFilter(_quiet_beam_logs)
    from beamtok.beam.dry_run import is_dry_run

    if is_dry_run(beam_args):
        _show_job_plan(ds, options, beam_args)
        return
    from beamtok.cache.build import run_cache
    from beamtok.cache.ranges import split_bytes_option

    started = time.perf_counter()
    counters: dict[str, int] = {}
    with _interrupted_build(options["output"]):
        manifest = run_cache(
            ds.spec,
            ds.shards,
            options["output"],
            beam_args,
            overwrite=options["overwrite"],
            progress=not quiet,
            row_group_rows=options.get("row_group_rows"),
            row_group_bytes=options.get("row_group_bytes"),
            split_bytes=split_bytes_option(options.get("split_bytes")),
            on_counters=counters.update,
        )
    totals = manifest.totals
    seconds = time.perf_counter() - started
    click.echo(
        f"cache {options['output']}: {totals['shards']} shards, {totals['rows']:,} rows, {totals['tokens']:,} tokens "
        f"({totals['tokens'] / seconds / 1e6:.2f}M tokens/s), documents {json.dumps(totals['documents'])}, spec {manifest.fingerprint}"
    )
    if counters and not quiet:
        shown = ("shards_written", "shards_reused", "split_shards", "ranges", "documents", "skipped_documents", "examples", "tokens")
        click.echo("Beam counters: " + ", ".join(f"{name} {counters.get(name, 0):,}" for name in shown))


@main.command()
@click.argument("directory")
@click.option("--shards", "sample", default=2, show_default=True, help="Shards to re-run and compare row by row (0: checksums only).")
@click.option("--seed", default=0, show_default=True, help="Which shards are sampled.")
@click.option("--fingerprint", help="Insist the cache was built with this spec fingerprint.")
@click.option("--source-root", type=click.Path(file_okay=False), help="Where the inputs are now, if they moved since the build (stands for the build's directory).")
@log_options
@user_errors
def verify(directory: str, sample: int, seed: int, fingerprint: str | None, source_root: str | None, quiet: bool) -> None:
    """Check a cache: every file against the manifest (present, size, checksum, rows), then
    re-run the per-shard step on sampled shards and compare every row. Exit 0 when all agree."""
    from beamtok.cache.verify import verify_cache

    report = verify_cache(directory, sample=sample, seed=seed, fingerprint=fingerprint, progress=not quiet, source_root=source_root)
    click.echo(
        f"{directory}: {report.files_checked}/{report.shards} shard files checked, "
        f"{len(report.shards_compared)} shard(s) re-run and compared ({report.rows_compared} rows): {report.shards_compared}"
    )
    for problem in report.problems:
        click.echo(f"PROBLEM {problem}", err=True)
    if not report.ok:
        sys.exit(1)
    if report.shards_compared:
        click.echo("OK: every shard file matches the manifest, and the re-run shards equal the on-the-fly stream row by row")
    else:
        click.echo("OK: every shard file matches the manifest (no shard was re-run; --shards N compares rows with the on-the-fly stream)")


@main.command()
@click.argument("directory")
@click.option("--batch-size", default=2, show_default=True)
@click.option("--batches", default=2, show_default=True)
@click.option("--seed", default=0, show_default=True, help="Shuffle seed.")
@click.option("--no-shuffle", is_flag=True, help="Rows in cache order (shard 0 first) instead of shuffled.")
@click.option("--max-chars", type=int, help="Cut each piece's text after this many characters.")
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
    max_chars: int | None,
    ids: bool,
    mask: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Print a few batches of a cache, decoded: each row split into its pieces (where
    documents or examples begin), optionally with token ids and the loss mask."""
    from beamtok import Dataset
    from beamtok.cache.reader import Cache
    from beamtok.row_pieces import row_pieces
    from beamtok.validate import check_int

    check_int(batch_size, "--batch-size", minimum=1)
    check_int(batches, "--batches", minimum=1)
    if max_chars is not None:
        check_int(max_chars, "--max-chars", minimum=1)
    tok = Cache(directory).tokenizer()
    ds = Dataset.from_cache(directory)
    ds = (ds if no_shuffle else ds.shuffle(window=256, seed=seed)).batch(batch_size)
    it = ds.iter()
    for b, batch in zip(range(batches), it):
        for row in range(len(batch["input_ids"])):
            example = {name: values[row] for name, values in batch.items()}
            pieces = row_pieces(example, tok.decode, max_chars=max_chars, mask=mask)
            where = {"batch": b, "row": row, **{k: int(example[k]) for k in ("shard", "index", "doc", "token")}}
            if as_json:
                click.echo(json.dumps({**where, "pieces": [p.to_json(ids=ids) for p in pieces]}))
                continue
            click.echo(f"--- batch {b} row {row}: shard {where['shard']} example {where['index']}, {len(pieces)} piece(s) ---")
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


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--tokenizer", help="Tokenizer for input files (a cache brings its own).")
@click.option("--documents", default=1000, show_default=True, help="Input files: documents read from each file.")
@click.option("--limit", type=int, help="Cache: rows read for the distributions. [default: all]")
@click.option("--format", "format_", type=click.Choice(["pretrain", "sft", "chat"]), default="pretrain", show_default=True, help="Input files: record kind.")
@click.option("--text-field", default="text", show_default=True, help="Input files: the text field.")
@click.option("--prompt-field", default="prompt", show_default=True)
@click.option("--completion-field", default="completion", show_default=True)
@click.option("--messages-field", default="messages", show_default=True)
@click.option("--chat-template", help="Input files, --format chat: Jinja chat template file (default: the tokenizer's).")
@click.option("--input-format", type=click.Choice(["auto", "jsonl", "parquet", "arrow", "text"]), default="auto", show_default=True)
@click.option("--on-error", type=click.Choice(["raise", "skip"]), default="skip", show_default=True, help="Input files: bad documents.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write histograms to this PNG file.")
@log_options
@user_errors
def stats(
    paths: tuple[str, ...],
    tokenizer: str | None,
    documents: int,
    limit: int | None,
    format_: str,
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
    from beamtok.data_stats import cache_stats, describe_stats, files_stats
    from beamtok.errors import ConfigError
    from beamtok.validate import check_int

    check_int(documents, "--documents", minimum=1)
    if limit is not None:
        check_int(limit, "--limit", minimum=1)
    if len(paths) == 1 and _is_cache(paths[0]):
        if tokenizer is not None:
            raise ConfigError(f"{paths[0]} is a cache: it brings its own tokenizer (drop --tokenizer)")
        summary, gathered = cache_stats(paths[0], limit=limit)
    else:
        if tokenizer is None:
            raise ConfigError("input files need --tokenizer (or give one cache directory)")
        from beamtok import Dataset

        ds = Dataset.from_files(list(paths), format=input_format, text_field=text_field, on_error=on_error)
        if format_ == "sft":
            ds = ds.tokenize_sft(tokenizer, prompt=prompt_field, completion=completion_field)
        elif format_ == "chat":
            ds = _on_the_command_line(ds.tokenize_chat)(tokenizer, template=chat_template, messages=messages_field)
        else:
            ds = ds.tokenize(tokenizer).ensure_bos_eos()
        summary, gathered = files_stats(ds, documents=documents)
        from beamtok import load_tokenizer

        summary["tokenizer_engine"] = load_tokenizer(tokenizer).engine
    if plot is not None:
        from beamtok.plots import plot_stats

        summary["plot"] = {"path": plot, "panels": plot_stats(gathered, plot, title=f"beamtok stats: {' '.join(paths)}")}
    if as_json:
        click.echo(json.dumps(summary, indent=1))
    else:
        click.echo(describe_stats(summary))
        if plot is not None:
            click.echo(f"histograms: {plot}")


@main.command()
@click.argument("state_file", type=click.Path(dir_okay=False))
@click.option(
    "--pipeline",
    help="The pipeline to check the state against: FILE.py:NAME or module:NAME (a Dataset, or a function "
    "returning one), or a cache directory.",
)
@log_options
@user_errors
def inspect(state_file: str, pipeline: str | None, quiet: bool) -> None:
    """What a saved state means: the reader that saved it, each stage's position, each open
    shard's file and position (byte, line or row; document; token offset), what was handed
    out. With --pipeline, whether it resumes that pipeline, naming what differs if not."""
    from beamtok.errors import ConfigError, StateError
    from beamtok.stream.explain import explain_state, find_states

    try:
        with open(state_file, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ConfigError(f"{state_file}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{state_file}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    found = find_states(data)
    if not found:
        raise ConfigError(f"{state_file}: holds no beamtok state (no object with a 'beamtok_state' key)")
    dataset = load_pipeline(pipeline) if pipeline is not None else None
    mismatched = 0
    for where, state in found:
        if len(found) > 1 or where != "$":
            click.echo(f"== state at {where}")
        for line in explain_state(state, dataset):
            click.echo(line)
        if dataset is not None:
            from beamtok.stream.iterator import DatasetIterator
            from beamtok.stream.split import ReaderSplit

            try:
                split = ReaderSplit(**state["split"]) if isinstance(state.get("split"), dict) else None
                if split is None:
                    raise StateError("the state has no reader split")
                DatasetIterator(dataset, split, state)
            except (StateError, ConfigError, TypeError) as e:
                mismatched += 1
                click.echo(f"does NOT resume {pipeline}: {e}")
            else:
                click.echo(f"resumes {pipeline}")
    if mismatched:
        sys.exit(1)


def load_pipeline(reference: str) -> Any:
    """A Dataset from ``FILE.py:NAME``, ``module:NAME`` (a Dataset or a function returning one)
    or a cache directory."""
    import importlib
    import importlib.util
    import os

    from beamtok import Dataset
    from beamtok.errors import ConfigError

    if ":" not in reference or os.path.isdir(reference):
        if _is_cache(reference):
            return Dataset.from_cache(reference)
        raise ConfigError(f"--pipeline {reference}: give FILE.py:NAME, module:NAME or a cache directory")
    target, name = reference.rsplit(":", 1)
    try:
        if target.endswith(".py"):
            if not os.path.isfile(target):
                raise ConfigError(f"--pipeline {reference}: {target} does not exist")
            spec = importlib.util.spec_from_file_location("beamtok_pipeline", target)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ImportError as e:
        raise ConfigError(f"--pipeline {reference}: cannot import {target}: {e}") from None
    if not hasattr(module, name):
        raise ConfigError(f"--pipeline {reference}: {target} has no {name!r}")
    value = getattr(module, name)
    if callable(value) and not isinstance(value, Dataset):
        try:
            value = value()
        except Exception as e:
            raise ConfigError(f"--pipeline {reference}: calling {name}() failed: {type(e).__name__}: {e}") from None
    if not isinstance(value, Dataset):
        raise ConfigError(f"--pipeline {reference}: {name} is a {type(value).__name__}, not a beamtok Dataset")
    return value


def _is_cache(path: str) -> bool:
    from beamtok.cache.manifest import MANIFEST
    from beamtok.cache.storage import Storage

    try:
        return Storage(path).exists(MANIFEST)
    except Exception:  # not a directory pyarrow can open: input files
        return False


if __name__ == "__main__":
    main()

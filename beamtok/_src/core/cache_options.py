"""The one table of cache options: what a dataset is made of (inputs, tokenizer, format,
packing) and how its cache is written. ``beamtok cache`` makes its command-line options from
it, its ``--config`` YAML and data configs take its names, and ``Dataset.cache`` its build
defaults; nothing else lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.transforms.packing_names import command_line_names

__all__ = [
    "BUILD_DEFAULTS",
    "BUILD_SETTINGS",
    "CACHE_OPTIONS",
    "DATASET_OPTIONS",
    "LOCAL_RUNNERS",
    "CacheOption",
    "beam_args",
    "defaults",
    "names",
    "with_option_names",
]


@dataclass(frozen=True)
class CacheOption:
    """One option: its name (the keyword and YAML key; ``--name-with-dashes`` on the command
    line), help text, default, value type or choices, and where it applies."""

    name: str
    help: str
    default: Any = None
    type: type | None = None
    choices: tuple[str, ...] | None = None
    switch: bool = False  # --name/--no-name on the command line
    flag: bool = False  # --name alone sets it
    scope: str = "dataset"  # "input" (which data), "dataset" (how it is read), "build" (how the cache is written)
    command_line: bool = True  # False: YAML only (beam_options), or data config only (cache)
    aliases: tuple[str, ...] = ()  # older names, still taken (on the command line and in files)

    @property
    def cli_name(self) -> str:
        return "--" + self.name.replace("_", "-")


LOCAL_RUNNERS = (None, "DirectRunner", "FnApiRunner")
"""The ``--runner`` values a build runs on this machine (pinned to the FnApiRunner)."""

CACHE_OPTIONS: tuple[CacheOption, ...] = (
    CacheOption("urls", "Input files or patterns.", scope="input", command_line=False),
    CacheOption("hf_dataset", "Read a Hugging Face dataset instead of URLS: a save_to_disk directory, a directory of data files, or a hub name (online).", scope="input"),
    CacheOption("hf_config", "The hub dataset's configuration (with --hf-dataset).", scope="input"),
    CacheOption("mds", "Read a MosaicML Streaming (MDS) dataset instead of URLS: its directory or index.json, local or remote.", scope="input"),
    CacheOption("split", "The split to cache: with --hf-dataset [default: train], or the MDS dataset's split subdirectory.", scope="input"),
    CacheOption("file_ranges", "Cut input files into ranges that are shards of their own, as Dataset.from_files(split_bytes=) streams them: a size (64MB) or auto (64 ranges a file, or 16 MiB ranges when more). A row never spans two ranges. [default: files whole]", scope="input"),
    CacheOption("input_format", "Input file format. [default: auto, from the file name]", "auto", choices=("auto", "jsonl", "parquet", "arrow", "text", "mds"), scope="input"),
    CacheOption("tokenizer", "Tokenizer directory or hub name."),
    CacheOption("seq_len", "Tokens per row (the longest row for pack_power_of_two).", type=int),
    CacheOption("records", "What the input records hold: text (pretrain), prompt/completion (sft) or chat messages (chat); the Dataset method is tokenize, tokenize_sft or tokenize_chat (older name: --format). [default: pretrain]", "pretrain", choices=("pretrain", "sft", "chat"), aliases=("format",)),
    CacheOption("pack", "Packing, named as the Dataset method (older names: concat, window, greedy, first_fit, best_fit, power_of_two). [default: concat_chunk for pretrain, pack_examples for sft/chat]", choices=command_line_names()),
    CacheOption("pack_method", "pack_examples: greedy (in order) or first_fit (first-fit decreasing over --pack-window examples). [default: greedy]", choices=("greedy", "first_fit")),
    CacheOption("stride", "Window stride for --pack sliding_window. [default: seq-len]", type=int),
    CacheOption("min_len", "pack_power_of_two: the shortest row (a power of two). [default: 64]", type=int),
    CacheOption("remainder", "concat_chunk: a shard's last partial row. [default: pad]", "pad", choices=("pad", "drop", "keep")),
    CacheOption("pack_window", "Examples per window of pack_examples --pack-method first_fit, documents per window of pack_documents. [default: 64 and 256]", type=int),
    CacheOption("long_docs", "pack_documents: documents longer than seq-len are split into rows or truncated. [default: split]", "split", choices=("split", "truncate")),
    CacheOption("bos_rows", "pack_documents: every row starts with the BOS token (prepended to pieces of split documents).", False, flag=True),
    CacheOption("text_field", "JSON field / Parquet column holding the text. [default: text]", "text"),
    CacheOption("prompt_field", "SFT prompt field. [default: prompt]", "prompt"),
    CacheOption("completion_field", "SFT completion field ('generation' is accepted too). [default: completion]", "completion"),
    CacheOption("messages_field", "Chat messages field. [default: messages]", "messages"),
    CacheOption("chat_template", "Jinja chat template file (default: the tokenizer's)."),
    CacheOption("template_kwargs", "Chat template keyword arguments as a JSON object, as apply_chat_template takes them (e.g. '{\"enable_thinking\": false}', tools, reasoning_effort); a mapping in YAML."),
    CacheOption("chat_date", "YYYY-MM-DD: the day strftime_now gives chat templates that write today's date (gpt-oss, Llama 3.2). [default: the day of rendering]"),
    CacheOption("max_length", "SFT/chat examples longer than this are truncated or dropped.", type=int),
    CacheOption("truncation", "How too-long SFT/chat examples are cut. [default: completion_tail]", "completion_tail", choices=("completion_tail", "prompt_head", "drop")),
    CacheOption("bos", "BOS at the start of each document/example. [default: on for pretrain; the tokenizer's policy for sft; for chat, as the template writes it]", switch=True),
    CacheOption("eos", "Ensure each pretraining document ends with EOS; for chat, EOS after each assistant turn that lacks one. [default: on for pretrain; for chat, as the template writes it]", switch=True),
    CacheOption("on_error", "Bad documents: stop, or skip and count. [default: raise]", "raise", choices=("raise", "skip")),
    CacheOption("cache", "Data configs: the directory this dataset is cached in (as it streams, or by `beamtok cache --config`).", scope="config", command_line=False),
    CacheOption("output", "Cache directory (local path, gs://... or s3://...).", scope="build"),
    CacheOption("overwrite", "Replace a cache built with another spec.", False, flag=True, scope="build"),
    CacheOption("megatron", "Write Megatron-Core's indexed dataset OUTPUT.bin and OUTPUT.idx (OUTPUT is their prefix) instead of a Parquet cache: what Dataset.to_megatron writes, one sequence a document, an EOS after each (--bos adds BOS too), no packing.", False, flag=True, scope="build"),
    CacheOption("row_group_rows", "Rows per Parquet row group (small groups: cheaper random access).", type=int, scope="build"),
    CacheOption("row_group_bytes", "Bytes of tokens per Parquet row group. [default: 8388608]", type=int, scope="build"),
    CacheOption("parquet_compat", "Write shard files every Parquet reader opens (snappy instead of zstd: fastparquet, Spark, BigQuery, Hive...).", False, flag=True, scope="build"),
    CacheOption("split_bytes", "Tokenize input files larger than this in ranges on several workers (uncompressed JSONL, Parquet); 'none' never splits. The cache is the same. [default: 16MiB]", "16MiB", scope="build"),
    CacheOption("beam_options", "Beam pipeline options: a mapping, or a list of --name=value strings.", (), scope="build", command_line=False),
)  # fmt: skip

DATASET_OPTIONS = tuple(o for o in CACHE_OPTIONS if o.scope in ("input", "dataset"))


ALIASES: Mapping[str, str] = {alias: o.name for o in CACHE_OPTIONS for alias in o.aliases}


def with_option_names(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``options`` with older option names (aliases) replaced by the table's; a ConfigError
    (naming ``where``) when an option is given under both."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        name = ALIASES.get(key, key)
        if name in out:
            older = next(a for a in options if ALIASES.get(a) == name)
            raise ConfigError(f"{where}: {name!r} is given twice ({older!r} is its older name); keep {name!r}")
        out[name] = value
    return out


def names(*scopes: str) -> tuple[str, ...]:
    """The option names of these scopes, in table order."""
    return tuple(o.name for o in CACHE_OPTIONS if o.scope in scopes)


def defaults(*scopes: str) -> dict[str, Any]:
    """The defaults of the options of these scopes that have one."""
    return {
        o.name: (list(o.default) if isinstance(o.default, tuple) else o.default)
        for o in CACHE_OPTIONS
        if o.scope in scopes and o.default is not None
    }


BUILD_DEFAULTS: Mapping[str, Any] = defaults("build")
# how a cache is written, but not where: what a data config (whose ``cache`` is the output) takes
BUILD_SETTINGS = tuple(name for name in names("build") if name != "output")


def beam_args(options: Mapping[str, Any]) -> list[str]:
    """Keyword Beam options as command-line flags: ``direct_num_workers=2`` -> ``--direct_num_workers=2``."""
    args = []
    for key, value in options.items():
        if value is True:
            args.append(f"--{key}")
        elif value is not False and value is not None:
            args.append(f"--{key}={value}")
    return args

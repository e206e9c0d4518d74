"""A data config file: named datasets, the training mixture, and validation sets, in YAML.

``load_config(path)`` returns the training stream and the validation streams it describes::

    tokenizer: data/tokenizers/gpt2     # defaults for every dataset below
    seq_len: 1024
    datasets:
      shakespeare:
        urls: ["data/corpus/shakespeare-{00..03}.jsonl"]
        cache: build/caches/shakespeare  # cached as it streams (or built by `beamtok cache --config`)
      pydocs:
        urls: ["data/corpus/pydocs-*.jsonl.zst"]
      held_out:
        urls: ["data/corpus/shakespeare-05.jsonl.gz"]
    train:
      weights: {shakespeare: 0.7, pydocs: 0.3}
      seed: 0
      shuffle: {window: 1024, seed: 0}
      batch: 8
    validation:
      sets: [held_out]
      batch: 8

A dataset takes the options of ``beamtok cache`` (``records``, ``text_field``, ``pack``,
``max_length``, ``hf_dataset``, ``mds``...: the one table of ``beamtok._src.core.cache_options``) by the
same names, its cache's build options too (``row_group_rows``, ``row_group_bytes``,
``parquet_compat``, ``split_bytes``, ``overwrite``, ``beam_options``), which may also be given
once at the top for every cache. The training mixture takes ``weights`` (a mapping of
dataset names), ``seed``, ``stop``, ``block_size`` and ``schedule`` (a list of
``{start_example, weights}``) and ``max_epochs`` (one repetition cap, or a mapping of dataset
names), then ``shuffle_shards`` (a seed), ``shuffle`` and ``batch`` or ``batch_tokens`` (a mapping
of ``max_tokens``, ``window``, ``order``, ``cycles``, ``seed``, ``min_len``, ``max_len``).
Validation sets are read the same way every time: their shards in order, no shuffle, every
document once, batched. Unknown keys are refused by name.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.core.cache_options import (
    BUILD_DEFAULTS,
    BUILD_SETTINGS,
    beam_args,
    defaults,
    names,
    with_option_names,
)
from beamtok._src.dataset.options import dataset_from_options

if TYPE_CHECKING:
    from beamtok._src.dataset.dataset import Dataset

__all__ = ["DataConfig", "load_config", "read_yaml"]

DATASET_KEYS = (*names("input", "dataset", "config"), *BUILD_SETTINGS)
DATASET_DEFAULTS = defaults("input", "dataset")
SHARED_KEYS = ("tokenizer", "seq_len", "pack", "on_error", *BUILD_SETTINGS)  # may be given once at the top
TOP_KEYS = ("datasets", "train", "validation", *SHARED_KEYS)
TRAIN_KEYS = (
    "weights",
    "seed",
    "stop",
    "block_size",
    "schedule",
    "max_epochs",
    "shuffle_shards",
    "shuffle",
    "batch",
    "batch_tokens",
)
BATCH_TOKENS_KEYS = ("max_tokens", "window", "order", "cycles", "seed", "min_len", "max_len")
VALIDATION_KEYS = ("sets", "batch")


@dataclass(frozen=True)
class DataConfig:
    """What a data config describes: the training stream, the validation streams by name,
    every named dataset's per-shard stream (on the fly), the cache directory each names and
    how each of those caches is written (its build options, defaults filled in).

    Attributes:
        train: The training Dataset.
        validation: The validation Datasets by name.
        datasets: Every named dataset of the file.
        caches: The caches the file names, by dataset.
        builds: What ``beamtok cache --config`` builds.
    """

    train: Dataset
    validation: dict[str, Dataset]
    datasets: dict[str, Dataset]
    caches: dict[str, str]
    builds: dict[str, dict[str, Any]]


def load_config(path: str) -> DataConfig:
    """The training and validation datasets of the data config at ``path``. Relative paths in
    it (input files, caches, chat templates, a tokenizer directory) are relative to the
    directory holding the file, not to the working directory.

    Args:
        path: The YAML data config.
    Returns:
        The config's datasets.
    Raises:
        ConfigError: The file is not a data config beamtok reads (the message names the key).
    """
    return config_from_mapping(read_yaml(path, "the data config"), path, base=os.path.dirname(os.path.abspath(path)))


def read_yaml(path: str, what: str) -> Any:
    """The parsed YAML file at ``path`` (empty: ``{}``); ``what`` names it when it cannot be read."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f) or {}
    except OSError as e:
        raise ConfigError(f"{path}: cannot read {what}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None


def config_from_mapping(data: Any, where: str, base: str | None = None) -> DataConfig:
    """A DataConfig from the parsed YAML mapping ``data`` (``where`` names it in errors;
    relative paths are relative to ``base``, or to the working directory when None)."""
    mapping = _mapping(data, where, TOP_KEYS)
    named = _mapping(mapping.get("datasets"), f"{where}: datasets", None)
    if not named:
        raise ConfigError(f"{where}: datasets: name at least one dataset")
    shared = {k: mapping[k] for k in SHARED_KEYS if k in mapping}
    datasets: dict[str, Dataset] = {}
    caches: dict[str, str] = {}
    builds: dict[str, dict[str, Any]] = {}
    for name, entry in named.items():
        options = {
            **DATASET_DEFAULTS,
            **shared,
            **_mapping(entry, f"{where}: datasets.{name}", DATASET_KEYS, aliases=True),
        }
        if isinstance(options.get("urls"), str):
            options["urls"] = [options["urls"]]
        if base is not None:
            options = _relative_to(base, options)
        build = {**BUILD_DEFAULTS, **{k: options.pop(k) for k in BUILD_SETTINGS if k in options}}
        try:
            datasets[name] = dataset_from_options(options)
            build = _build_options(build)
        except ConfigError as e:
            raise ConfigError(f"{where}: datasets.{name}: {e}") from None
        if options.get("cache"):
            caches[name] = str(options["cache"])
            builds[name] = build
    streams = {
        name: _cached_as_it_streams(ds, caches[name], builds[name]) if name in caches else ds
        for name, ds in datasets.items()
    }
    train = _train(_mapping(mapping.get("train"), f"{where}: train", TRAIN_KEYS), streams, f"{where}: train")
    validation = _validation(
        _mapping(mapping.get("validation") or {}, f"{where}: validation", VALIDATION_KEYS),
        streams,
        f"{where}: validation",
    )
    return DataConfig(train, validation, datasets, caches, builds)


def _build_options(build: dict[str, Any]) -> dict[str, Any]:
    """A dataset's build options checked as ``beamtok cache`` checks them (sizes parsed, Beam
    options as flags)."""
    from beamtok._src.cache.build.ranges import split_bytes_option

    for key in ("row_group_rows", "row_group_bytes"):
        if build.get(key) is not None:
            build[key] = _whole(build[key], key)
    for key in ("parquet_compat", "overwrite"):
        if not isinstance(build[key], bool):
            raise ConfigError(f"{key}: must be true or false, got {build[key]!r}")
    build["split_bytes"] = split_bytes_option(build["split_bytes"], "split_bytes")
    options = build["beam_options"]
    build["beam_options"] = beam_args(options) if isinstance(options, dict) else [str(arg) for arg in options]
    return build


def _cached_as_it_streams(ds: Dataset, directory: str, build: dict[str, Any]) -> Dataset:
    """``ds`` caching itself at ``directory`` with the Parquet layout its build options name."""
    return ds.cache_as_you_go(
        directory,
        row_group_rows=build.get("row_group_rows"),
        row_group_bytes=build.get("row_group_bytes"),
        parquet_compat=build["parquet_compat"],
    )


def _relative_to(base: str, options: dict[str, Any]) -> dict[str, Any]:
    """Local relative paths of a dataset's options joined to ``base``; a tokenizer only when
    ``base`` holds that directory (otherwise it may be a hub name)."""

    def joined(value: Any) -> Any:
        if not isinstance(value, str) or not value or "://" in value or os.path.isabs(os.path.expanduser(value)):
            return value
        return os.path.normpath(os.path.join(base, value))

    out = dict(options)
    if isinstance(out.get("urls"), list):
        out["urls"] = [joined(url) for url in out["urls"]]
    out["cache"] = joined(out.get("cache"))  # made by the build: it need not exist yet
    for key in ("chat_template", "mds", "hf_dataset"):  # a name that is not a file here is left alone
        if isinstance(out.get(key), str) and os.path.exists(joined(out[key])):
            out[key] = joined(out[key])
    tokenizer = out.get("tokenizer")
    if isinstance(tokenizer, str) and os.path.isdir(joined(tokenizer)):
        out["tokenizer"] = joined(tokenizer)
    return out


def _whole(value: Any, where: str) -> int:
    """``value`` as a whole number, or a ConfigError naming where it was written."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, str))
        or (isinstance(value, str) and not value.strip().lstrip("-").isdigit())
    ):
        raise ConfigError(f"{where}: must be a whole number, got {value!r}")
    return int(value)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: must be a number, got {value!r}")
    return float(value)


def _mapping(value: Any, where: str, known: tuple[str, ...] | None, *, aliases: bool = False) -> dict[str, Any]:
    if value is None:
        raise ConfigError(f"{where}: missing")
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a mapping, got {type(value).__name__}")
    out = {str(k).replace("-", "_"): v for k, v in value.items()}
    if aliases:  # a dataset's options: older option names are still taken
        out = with_option_names(out, where)
    if known is not None:
        for key in out:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                raise ConfigError(
                    f"{where}: unknown key {key!r}"
                    + (f"; did you mean {close[0]!r}?" if close else f"; known: {list(known)}")
                )
    return out


def _named(name: Any, streams: dict[str, Dataset], where: str) -> Dataset:
    if name not in streams:
        close = difflib.get_close_matches(str(name), list(streams), n=1)
        raise ConfigError(
            f"{where}: no dataset named {name!r}"
            + (f"; did you mean {close[0]!r}?" if close else f"; datasets: {list(streams)}")
        )
    return streams[name]


def _weights(value: Any, names: list[str], where: str) -> list[float]:
    weights = _mapping(value, where, tuple(names))
    return [_number(weights.get(name, 0.0), f"{where}.{name}") for name in names]


def _train(train: dict[str, Any], streams: dict[str, Dataset], where: str) -> Dataset:
    from beamtok._src.dataset.dataset import Dataset

    names = list(_mapping(train.get("weights"), f"{where}: weights", None))
    for name in names:
        _named(name, streams, f"{where}: weights")
    sources = [streams[name] for name in names]
    if train.get("shuffle_shards") is not None:
        sources = [s.shuffle_shards(_whole(train["shuffle_shards"], f"{where}: shuffle_shards")) for s in sources]
    caps: Any = train.get("max_epochs")
    if isinstance(caps, dict):
        given = _mapping(caps, f"{where}: max_epochs", tuple(names))
        caps = [None if given.get(n) is None else _whole(given[n], f"{where}: max_epochs.{n}") for n in names]
    elif caps is not None:
        caps = _whole(caps, f"{where}: max_epochs")
    if len(sources) == 1 and "schedule" not in train and caps is None:
        ds = sources[0]
    else:
        weights: Any = _weights(train["weights"], names, f"{where}: weights")
        if "schedule" in train:
            stages = train["schedule"]
            if not isinstance(stages, list):
                raise ConfigError(f"{where}: schedule must be a list of {{start_example, weights}}")
            weights = [(0, weights)]
            for i, stage in enumerate(stages):
                stage = _mapping(stage, f"{where}: schedule[{i}]", ("start_example", "weights"))
                start = _whole(stage.get("start_example"), f"{where}: schedule[{i}].start_example")
                weights.append((start, _weights(stage["weights"], names, f"{where}: schedule[{i}].weights")))
        block = train.get("block_size")
        ds = Dataset.mix(
            sources,
            weights,
            seed=_whole(train.get("seed", 0), f"{where}: seed"),
            stop=str(train.get("stop", "never")),
            block_size=None if block is None else _whole(block, f"{where}: block_size"),
            max_epochs=caps,
        )
    if train.get("shuffle") is not None:
        shuffle = _mapping(train["shuffle"], f"{where}: shuffle", ("window", "seed"))
        ds = ds.shuffle(
            _whole(shuffle.get("window"), f"{where}: shuffle.window"),
            seed=_whole(shuffle.get("seed", 0), f"{where}: shuffle.seed"),
        )
    if train.get("batch") is not None and train.get("batch_tokens") is not None:
        raise ConfigError(f"{where}: give batch or batch_tokens, not both")
    if train.get("batch") is not None:
        ds = ds.batch(_whole(train["batch"], f"{where}: batch"))
    if train.get("batch_tokens") is not None:
        options = _mapping(train["batch_tokens"], f"{where}: batch_tokens", BATCH_TOKENS_KEYS)
        if "max_tokens" not in options:
            raise ConfigError(f"{where}: batch_tokens needs max_tokens")
        max_len = options.get("max_len")
        if isinstance(max_len, list):
            max_len = [tuple(stage) if isinstance(stage, list) else stage for stage in max_len]
        ds = ds.batch_tokens(
            _whole(options["max_tokens"], f"{where}: batch_tokens.max_tokens"),
            **{k: v for k, v in options.items() if k not in ("max_tokens", "max_len")},
            max_len=max_len,
        )
    return ds


def _validation(validation: dict[str, Any], streams: dict[str, Dataset], where: str) -> dict[str, Dataset]:
    sets = validation.get("sets", [])
    if not isinstance(sets, list):
        raise ConfigError(f"{where}: sets must be a list of dataset names")
    out = {}
    for name in sets:
        ds = _named(name, streams, f"{where}: sets")  # shards in order, no shuffle, one pass
        out[name] = (
            ds.batch(_whole(validation["batch"], f"{where}: batch")) if validation.get("batch") is not None else ds
        )
    return out

"""``beamtok inspect``: a saved state in words, and whether it resumes a given pipeline."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from beamtok._src.cli.app import is_cache, log_options, main, user_errors

__all__ = ["inspect", "load_pipeline"]


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
    from beamtok._src.base.errors import ConfigError, StateError
    from beamtok._src.stream.explain import explain_state
    from beamtok._src.stream.state import find_states

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
    loaded = load_pipeline(pipeline) if pipeline is not None else None
    from_cache = pipeline is not None and is_cache(pipeline)
    mismatched = 0
    for where, state in found:
        if len(found) > 1 or where != "$":
            click.echo(f"== state at {where}")
        dataset = loaded
        if loaded is not None and from_cache:  # a directory names no stream stages: the state's own parts do
            dataset, taken = with_saved_stream(loaded, state)
            if taken:
                click.echo(f"(stream options and stages of the state, read from the cache: {taken})")
        for line in explain_state(state, dataset.pipeline if dataset is not None else None):
            click.echo(line)
        if dataset is not None:
            from beamtok._src.stream.iterator import DatasetIterator
            from beamtok._src.stream.ranks.reader_split import ReaderSplit

            try:
                split = ReaderSplit(**state["split"]) if isinstance(state.get("split"), dict) else None
                if split is None:
                    raise StateError("the state has no reader split")
                DatasetIterator(dataset.pipeline, split, state)
            except (StateError, ConfigError, TypeError) as e:
                mismatched += 1
                click.echo(f"does NOT resume {pipeline}: {e}")
            else:
                click.echo(f"resumes {pipeline}")
    if mismatched:
        sys.exit(1)


def with_saved_stream(cached: Any, state: dict[str, Any]) -> tuple[Any, str]:
    """The cache's dataset with the stream options and stages the state's plan holds (epochs,
    shard order seed, open shards, global shuffle, each stage's options), so a state saved by
    ``from_cache(DIR).shuffle(...).batch(...)`` (or its on-the-fly twin) is checked whole;
    ``(cached, '')`` when the state holds no plan that names them."""
    from beamtok._src.base.errors import StateError
    from beamtok._src.stream.kinds import stage_named
    from beamtok._src.stream.pipeline import Pipeline
    from beamtok._src.stream.ranks.reader_split import ReaderSplit
    from beamtok._src.stream.roots.global_shuffle import GlobalShuffleRoot
    from beamtok._src.stream.state_migration import migrate
    from beamtok._src.stream.stream_plan import plan_of, stage_configs

    split = state.get("split")
    try:
        plan = plan_of(migrate(state))
        if not isinstance(split, dict):
            return cached, ""
        options = plan["root"]["options"]
        root = cached.pipeline.root.with_options(
            epochs=options["epochs"], shuffle_seed=options["shuffle_seed"], interleave=options["interleave"]
        )
        if isinstance(options.get("global_shuffle"), dict):
            shuffle = options["global_shuffle"]
            root = GlobalShuffleRoot(
                root, shuffle["seed"], shuffle["window"], None, shuffle.get("spread"), shuffle.get("unit_rows")
            )
        stages = []
        for name, config in stage_configs(plan):
            kind = stage_named(name)
            if kind is None or config.get("unkept"):  # a state of an earlier version kept only a hash of it
                return cached, ""
            stages.append(kind(**config))
        reader = ReaderSplit(split["rank"], split["world_size"], mode=options["split"])
    except (KeyError, TypeError, ValueError, StateError):
        return cached, ""
    rebuilt = type(cached)(Pipeline(root, reader, tuple(stages)))
    shown = [f"{s.NAME}({', '.join(f'{k}={v!r}' for k, v in s.to_json().items() if k != 'stage')})" for s in stages]
    return rebuilt, ", ".join([f"epochs={options['epochs']!r}", *shown])


def load_pipeline(reference: str) -> Any:
    """A Dataset from ``FILE.py:NAME``, ``module:NAME`` (a Dataset or a function returning one)
    or a cache directory."""
    import importlib
    import importlib.util
    import os

    from beamtok import Dataset
    from beamtok._src.base.errors import ConfigError

    if ":" not in reference or os.path.isdir(reference):
        if is_cache(reference):
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

"""The files behind a Hugging Face dataset, so beamtok reads them as shards.

Three kinds of name are resolved, none by downloading anything itself:

- a directory written by ``Dataset.save_to_disk`` (``state.json`` lists its Arrow files);
- a directory written by ``DatasetDict.save_to_disk`` (``dataset_dict.json``; one
  subdirectory per split, each as above);
- anything else ``datasets.load_dataset_builder`` resolves: a local directory of data files
  (JSON lines, Parquet, text), or a hub name when the hub can be reached, whose data files of
  the split become the shards.

Each file is one shard, so Beam workers and ranks share the dataset file by file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from beamtok._src.base.errors import ConfigError, InputError

__all__ = ["HfFiles", "hf_dataset_files", "hub_url"]

HF_URL = re.compile(r"hf://datasets/(?P<repo>[^@/]+/[^@/]+)(?:@(?P<revision>[^/]+))?/(?P<path>.+)")

FORMAT_OF_SUFFIX = {".arrow": "arrow", ".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl", ".txt": "text"}


@dataclass(frozen=True)
class HfFiles:
    """The data files of one split, their format, and where they came from."""

    urls: list[str]
    format: str
    origin: str


def hf_dataset_files(name: str, *, split: str = "train", config: str | None = None) -> HfFiles:
    """The files of ``split`` of the dataset ``name`` (a saved directory, a data directory or
    a hub name)."""
    if os.path.isfile(os.path.join(name, "dataset_dict.json")):
        return _saved_split(name, split)
    if os.path.isfile(os.path.join(name, "state.json")):
        return _saved(name, f"{name} (save_to_disk)")
    return _from_builder(name, split, config)


def _saved_split(directory: str, split: str) -> HfFiles:
    with open(os.path.join(directory, "dataset_dict.json")) as f:
        splits = json.load(f).get("splits", [])
    if split not in splits:
        raise ConfigError(f"{directory}: no split {split!r}; its splits are {splits} (choose one with split=/--split)")
    return _saved(os.path.join(directory, split), f"{directory} split {split!r} (save_to_disk)")


def _saved(directory: str, origin: str) -> HfFiles:
    with open(os.path.join(directory, "state.json")) as f:
        state = json.load(f)
    files = [os.path.join(directory, entry["filename"]) for entry in state.get("_data_files", [])]
    if not files:
        raise InputError(f"{directory}: state.json lists no data files")
    missing = [p for p in files if not os.path.isfile(p)]
    if missing:
        raise InputError(f"{directory}: data files listed in state.json are missing: {missing}")
    return HfFiles(files, "arrow", origin)


def _from_builder(name: str, split: str, config: str | None) -> HfFiles:
    try:
        import datasets
    except ImportError as e:
        raise ConfigError(
            f"{name}: reading Hugging Face datasets needs the 'hf' extra (pip install 'beamtok[hf]')"
        ) from e
    if not os.path.exists(name) and ("/" not in name or name.startswith((".", "/"))):
        raise ConfigError(f"{name}: no such directory (and not a hub name of the form owner/dataset)")
    try:
        builder = datasets.load_dataset_builder(name, config)
    except Exception as e:  # the hub client raises its own types; offline, one of several
        raise InputError(
            f"{name}: cannot resolve the dataset ({type(e).__name__}: {e}); offline, pass a directory written by "
            "save_to_disk or a directory of data files"
        ) from e
    data_files = builder.config.data_files or {}
    if split not in data_files:
        raise ConfigError(
            f"{name}: no split {split!r}; its splits are {sorted(data_files)} (choose one with split=/--split)"
        )
    urls = [hub_url(str(u)) for u in data_files[split]]
    formats = {
        FORMAT_OF_SUFFIX.get(os.path.splitext(u.split("::")[0].removesuffix(".gz").removesuffix(".zst"))[1].lower())
        for u in urls
    }
    if None in formats or len(formats) != 1:
        raise ConfigError(f"{name}: split {split!r} has data files beamtok cannot read as one format: {urls[:5]}")
    return HfFiles(urls, formats.pop() or "auto", f"{name} split {split!r}")


def hub_url(url: str) -> str:
    """An ``hf://datasets/owner/name@revision/path`` data file as the https URL that serves it
    (other URLs unchanged)."""
    match = HF_URL.fullmatch(url)
    if match is None:
        return url
    revision = match["revision"] or "main"
    return f"https://huggingface.co/datasets/{match['repo']}/resolve/{revision}/{match['path']}"

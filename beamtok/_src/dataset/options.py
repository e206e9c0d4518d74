"""The on-the-fly dataset that options of the cache-option table describe (see
``beamtok._src.core.cache_options``): which inputs (URLs, a Hugging Face dataset, an MDS dataset), the
record format, tokenizer, BOS/EOS and packing. ``beamtok cache`` and data configs both build
their datasets here; they differ only in how an option is spelled in a message
(``--seq-len`` on the command line, ``seq_len`` in a file).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.dataset.dataset import Dataset
from beamtok._src.transforms.packing_modes import Greedy
from beamtok._src.transforms.packing_names import mode_named

__all__ = ["dataset_from_options", "in_a_file", "input_urls", "on_the_command_line"]


def on_the_command_line(name: str) -> str:
    return "URL arguments" if name == "urls" else "--" + name.replace("_", "-")


def in_a_file(name: str) -> str:
    return name


def input_urls(options: dict[str, Any], spell: Callable[[str], str] = in_a_file) -> dict[str, Any]:
    """``options`` with ``urls`` and ``input_format`` filled in from ``hf_dataset`` or ``mds``
    (a Hugging Face dataset's or an MDS dataset's files), checking the input options agree."""
    hf, mds = options.get("hf_dataset"), options.get("mds")
    if hf and mds:
        raise ConfigError(f"pass either {spell('hf_dataset')} or {spell('mds')}, not both")
    if hf:
        if options.get("urls"):
            raise ConfigError(f"pass either {spell('urls')} or {spell('hf_dataset')}, not both")
        from beamtok._src.sources.hf_files import hf_dataset_files

        found = hf_dataset_files(hf, split=options.get("split") or "train", config=options.get("hf_config"))
        return {**options, "urls": found.urls, "input_format": found.format}
    if mds:
        if options.get("urls"):
            raise ConfigError(f"pass either {spell('urls')} or {spell('mds')}, not both")
        if options.get("hf_config"):
            raise ConfigError(f"{spell('hf_config')} applies to {spell('hf_dataset')} only")
        from beamtok._src.sources.mds import mds_shard_urls

        return {**options, "urls": mds_shard_urls(mds, split=options.get("split")), "input_format": "mds"}
    if options.get("split") or options.get("hf_config"):
        raise ConfigError(
            f"{spell('split')} applies to {spell('hf_dataset')} and {spell('mds')} only, {spell('hf_config')} to {spell('hf_dataset')} only"
        )
    return options


def dataset_from_options(options: dict[str, Any], spell: Callable[[str], str] = in_a_file) -> Dataset:
    """The on-the-fly dataset (per-shard stages only) of cache options (defaults applied by
    the caller); ``spell`` names an option in a message."""
    options = input_urls(options, spell)
    for required in ("urls", "tokenizer"):
        if not options.get(required):
            raise ConfigError(
                f"missing {spell(required)}"
                + (
                    f" (or {spell('hf_dataset')} / {spell('mds')})"
                    if required == "urls" and spell is not in_a_file
                    else ""
                )
            )
    kind = options["records"]
    if kind not in ("pretrain", "sft", "chat"):
        raise ConfigError(f"{spell('records')} must be pretrain, sft or chat, got {kind!r}")
    pack = options.get("pack") or ("concat_chunk" if kind == "pretrain" else Greedy.API)
    mode = mode_named(pack, options.get("pack_method"), spell)
    if mode.HAS_SEQ_LEN and options.get("seq_len") is None:
        raise ConfigError(f"{spell('seq_len')} is required with {spell('pack')} {pack}")
    ds = Dataset.from_files(
        list(options["urls"]),
        format=options["input_format"],
        text_field=options["text_field"],
        on_error=options["on_error"],
        split_bytes=options.get("file_ranges"),
    )
    sft = {"max_length": options.get("max_length"), "truncation": options["truncation"], "bos": options.get("bos")}
    if kind == "sft":
        ds = ds.tokenize_sft(
            options["tokenizer"], prompt=options["prompt_field"], completion=options["completion_field"], **sft
        )
    elif kind == "chat":
        ds = ds.tokenize_chat(
            options["tokenizer"],
            template=options.get("chat_template"),
            messages=options["messages_field"],
            eos=options.get("eos"),
            template_kwargs=template_kwargs_option(options.get("template_kwargs")),
            date=options.get("chat_date"),
            **sft,
        )
    else:
        ds = ds.tokenize(options["tokenizer"])
        bos, eos = options.get("bos", True) is not False, options.get("eos", True) is not False
        ref = ds.spec.tokenizer
        for wanted, token_id, name in (
            (bos, ref.bos_id if ref else None, "bos"),
            (eos, ref.eos_id if ref else None, "eos"),
        ):
            if wanted and token_id is None:  # said with the option's own spelling, not the Python call's
                off = f"--no-{name}" if spell is on_the_command_line else f"{name}: false"
                raise ConfigError(
                    f"tokenizer {options['tokenizer']!r} has no {name.upper()} token; pass {off} to build without one"
                )
        if bos or eos:
            ds = ds.ensure_bos_eos(bos=bos, eos=eos)
    return mode.from_options(ds, options)


def template_kwargs_option(value: Any) -> dict[str, Any] | None:
    """``template_kwargs`` as given: a JSON object on the command line, a mapping in YAML."""
    if value is None or isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError) as e:
        raise ConfigError(
            f"template_kwargs must be a JSON object, e.g. '{{\"enable_thinking\": false}}': {e}"
        ) from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"template_kwargs must be a JSON object (names to values), got {value!r}")
    return parsed

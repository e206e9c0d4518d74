"""Packing modes: one class each (beamtok._src.transforms.packing_modes). The command line and data
configs name them as the API does, the old names stay aliases, and a spec's JSON form — what
fingerprints are made of — is the one every earlier version wrote."""

from __future__ import annotations

import itertools
import warnings

import pytest
from click.testing import CliRunner

from beamtok import ConfigError, Dataset
from beamtok._src.cli import main
from beamtok._src.core.cache_options import defaults
from beamtok._src.dataset.options import dataset_from_options
from beamtok._src.transforms.packing_modes import PACKING_MODES
from beamtok._src.transforms.packing_names import command_line_names
from beamtok.testing import assert_items_equal

from conftest import TOKENIZER_DIR, real_paragraphs, write_jsonl

TOKENIZER = str(TOKENIZER_DIR)


@pytest.fixture
def files(tmp_path):
    paragraphs = real_paragraphs(40)
    return [
        str(write_jsonl(tmp_path / f"in-{i}.jsonl", [{"text": p} for p in paragraphs[i * 20 : (i + 1) * 20]]))
        for i in range(2)
    ]


def tokenized(files):
    return Dataset.from_files(files).tokenize(TOKENIZER).ensure_bos_eos()


# what each API call stores; these dicts are the JSON every earlier version fingerprinted
API_CALLS = {
    "concat_chunk": (
        lambda ds: ds.concat_chunk(64, remainder="drop"),
        {"mode": "concat", "seq_len": 64, "pad_id": 50256, "stride": None, "remainder": "drop", "window": None},
    ),
    "pad": (
        lambda ds: ds.pad(64),
        {"mode": "pad", "seq_len": 64, "pad_id": 50256, "stride": None, "remainder": "pad", "window": None},
    ),
    "sliding_window": (
        lambda ds: ds.sliding_window(64, stride=48),
        {"mode": "window", "seq_len": 64, "pad_id": 50256, "stride": 48, "remainder": "pad", "window": None},
    ),
    "pack_examples": (
        lambda ds: ds.pack_examples(512),
        {"mode": "greedy", "seq_len": 512, "pad_id": 50256, "stride": None, "remainder": "pad", "window": None},
    ),
    "pack_examples first_fit": (
        lambda ds: ds.pack_examples(512, method="first_fit", window=8),
        {"mode": "first_fit", "seq_len": 512, "pad_id": 50256, "stride": None, "remainder": "pad", "window": 8},
    ),
    "pack_documents": (
        lambda ds: ds.pack_documents(64, window=16, long_docs="truncate", bos=True),
        {
            "mode": "best_fit",
            "seq_len": 64,
            "pad_id": 50256,
            "stride": None,
            "remainder": "pad",
            "window": 16,
            "long_docs": "truncate",
            "bos_id": 50256,
        },
    ),
    "pack_power_of_two": (
        lambda ds: ds.pack_power_of_two(64, min_len=16),
        {"mode": "power_of_two", "seq_len": 64, "pad_id": 50256, "stride": None, "remainder": "pad", "window": 16},
    ),
}

# the same calls as option-table entries, under the API name and under the old name
OPTIONS = {
    "concat_chunk": ({"pack": "concat_chunk", "seq_len": 64, "remainder": "drop"}, "concat"),
    "pad": ({"pack": "pad", "seq_len": 64}, "pad"),
    "sliding_window": ({"pack": "sliding_window", "seq_len": 64, "stride": 48}, "window"),
    "pack_examples": ({"pack": "pack_examples", "seq_len": 512}, "greedy"),
    "pack_examples first_fit": (
        {"pack": "pack_examples", "pack_method": "first_fit", "seq_len": 512, "pack_window": 8},
        "first_fit",
    ),
    "pack_documents": (
        {"pack": "pack_documents", "seq_len": 64, "pack_window": 16, "long_docs": "truncate", "bos_rows": True},
        "best_fit",
    ),
    "pack_power_of_two": ({"pack": "pack_power_of_two", "seq_len": 64, "min_len": 16}, "power_of_two"),
}


def test_every_mode_is_reachable_from_the_api_and_the_option_table():
    assert {json["mode"] for _, json in API_CALLS.values()} == set(PACKING_MODES) - {"none"}
    assert set(OPTIONS) == set(API_CALLS)
    names = command_line_names()
    assert {
        "concat_chunk",
        "pad",
        "sliding_window",
        "pack_examples",
        "pack_documents",
        "pack_power_of_two",
        "none",
    } <= set(names)
    assert {"concat", "window", "greedy", "first_fit", "best_fit", "power_of_two"} <= set(names)


@pytest.mark.parametrize("name", list(API_CALLS))
def test_a_mode_s_json_form_is_what_earlier_versions_fingerprinted(files, name):
    call, expected = API_CALLS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pack_examples on pretraining text warns
        ds = call(tokenized(files))
    assert ds._pipeline.root.spec.pack.to_json() == expected


@pytest.mark.parametrize("name", list(OPTIONS))
def test_the_option_table_names_modes_as_the_api_does_and_keeps_the_old_names(files, name):
    call, _ = API_CALLS[name]
    options, old = OPTIONS[name]
    base = {**defaults("input", "dataset"), "urls": files, "tokenizer": TOKENIZER}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = call(tokenized(files))
        by_api_name = dataset_from_options({**base, **options})
        by_old_name = dataset_from_options(
            {**base, **{k: v for k, v in options.items() if k != "pack_method"}, "pack": old}
        )
    assert by_api_name.stream_fingerprint == expected.stream_fingerprint == by_old_name.stream_fingerprint
    assert_items_equal(list(itertools.islice(by_api_name, 12)), list(itertools.islice(expected, 12)))


def test_option_mistakes_are_refused_by_name(files):
    base = {**defaults("input", "dataset"), "urls": files, "tokenizer": TOKENIZER, "seq_len": 64}
    with pytest.raises(ConfigError, match=r"pack must be one of concat_chunk, .*got 'concat_chunks'"):
        dataset_from_options({**base, "pack": "concat_chunks"})
    with pytest.raises(ConfigError, match=r"pack_method applies to pack pack_examples only"):
        dataset_from_options({**base, "pack": "pad", "pack_method": "first_fit"})
    with pytest.raises(ConfigError, match=r"min_len must be a power of two, got 24"):
        dataset_from_options({**base, "pack": "pack_power_of_two", "min_len": 24})


def test_beamtok_cache_packs_power_of_two_rows(tmp_path, files):
    """`--pack pack_power_of_two` (refused before: the command line knew only some modes)."""
    out = tmp_path / "cache"
    result = CliRunner().invoke(
        main,
        [
            "cache",
            *files,
            "-o",
            str(out),
            "--tokenizer",
            TOKENIZER,
            "--seq-len",
            "64",
            "--pack",
            "pack_power_of_two",
            "--min-len",
            "16",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    expected = tokenized(files).pack_power_of_two(64, min_len=16)
    rows = list(Dataset.from_cache(str(out)))
    assert_items_equal(rows, list(expected))
    assert {len(row["input_ids"]) for row in rows} <= {16, 32, 64} and len({len(row["input_ids"]) for row in rows}) > 1

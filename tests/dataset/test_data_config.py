"""Data config files: named datasets, the training mixture, validation sets."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from beamtok import ConfigError, Dataset, load_config
from beamtok._src.cli import main
from beamtok._src.shards.processor import ShardProcessor
from beamtok.testing import assert_items_equal

from conftest import ROOT, TOKENIZER_DIR, real_paragraphs, write_jsonl

TOKENIZER = str(TOKENIZER_DIR)


@pytest.fixture
def corpus(tmp_path):
    paragraphs = real_paragraphs(160)
    out = {}
    for name, lo in (("a", 0), ("b", 60), ("val", 120)):
        out[name] = [
            str(
                write_jsonl(
                    tmp_path / f"{name}-{i}.jsonl", [{"text": p} for p in paragraphs[lo + i * 20 : lo + (i + 1) * 20]]
                )
            )
            for i in range(2)
        ]
    return out


def write_config(tmp_path, corpus, **changes):
    config = {
        "tokenizer": TOKENIZER,
        "seq_len": 64,
        "datasets": {
            "a": {"urls": corpus["a"], "cache": str(tmp_path / "cache-a")},
            "b": {"urls": corpus["b"], "seq_len": 64, "remainder": "drop"},
            "val": {"urls": corpus["val"]},
        },
        "train": {
            "weights": {"a": 0.75, "b": 0.25},
            "seed": 3,
            "block_size": 32,
            "schedule": [{"start_example": 64, "weights": {"a": 0.5, "b": 0.5}}],
            "shuffle": {"window": 16, "seed": 1},
            "batch": 4,
        },
        "validation": {"sets": ["val"], "batch": 4},
    }
    config.update(changes)
    path = tmp_path / "data.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def packed(urls, **kwargs):
    return Dataset.from_files(urls).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(64, **kwargs)


def test_a_config_streams_what_it_says(tmp_path, corpus):
    config = load_config(write_config(tmp_path, corpus))
    expected = Dataset.mix(
        [packed(corpus["a"]), packed(corpus["b"], remainder="drop")],
        [(0, [0.75, 0.25]), (64, [0.5, 0.5])],
        seed=3,
        block_size=32,
    )
    expected = expected.shuffle(16, seed=1).batch(4)
    assert config.train.stream_fingerprint == expected.stream_fingerprint
    assert_items_equal(list(itertools.islice(config.train, 40)), list(itertools.islice(expected, 40)))
    assert (
        config.caches == {"a": str(tmp_path / "cache-a")} and (tmp_path / "cache-a" / "shards").exists()
    )  # cached as it streamed


def test_validation_sets_are_the_same_every_time_in_file_order(tmp_path, corpus):
    validation = load_config(write_config(tmp_path, corpus)).validation["val"]
    first, second = list(validation), list(validation)
    assert_items_equal(first, second)
    assert_items_equal(first, list(packed(corpus["val"]).batch(4)))
    it = validation.iter()
    list(it)
    assert it.stats()["documents"]["read"] == 40 and it.stats()["tokens"] == it.stats()["delivered"]["tokens"]
    ranks = [list(validation.shard_by_rank(r, 2, split="examples")) for r in range(2)]
    assert sum(len(r) for r in ranks) == len(first)


def test_caps_best_fit_and_token_budget_batches_from_a_config(tmp_path, corpus):
    train = {
        "weights": {"a": 1, "b": 1},
        "block_size": 32,
        "max_epochs": {"a": 1},
        "batch_tokens": {"max_tokens": 256, "window": 64, "order": "grow", "max_len": [[0, 32], [64, 64]]},
    }
    datasets = {
        "a": {"urls": corpus["a"], "pack": "best_fit", "pack_window": 8, "bos_rows": True},
        "b": {"urls": corpus["b"]},
        "val": {"urls": corpus["val"]},
    }
    config = load_config(write_config(tmp_path, corpus, train=train, datasets=datasets))
    a = Dataset.from_files(corpus["a"]).tokenize(TOKENIZER).ensure_bos_eos().pack_documents(64, window=8, bos=True)
    expected = Dataset.mix([a, packed(corpus["b"])], [1, 1], block_size=32, max_epochs=[1, None])
    expected = expected.batch_tokens(256, window=64, order="grow", max_len=[(0, 32), (64, 64)])
    assert config.train.stream_fingerprint == expected.stream_fingerprint
    assert_items_equal(list(itertools.islice(config.train, 30)), list(itertools.islice(expected, 30)))
    with pytest.raises(ConfigError, match=r"train: batch_tokens: unknown key 'max_token'; did you mean 'max_tokens'\?"):
        load_config(write_config(tmp_path, corpus, train={**train, "batch_tokens": {"max_token": 256}}))
    with pytest.raises(ConfigError, match="batch or batch_tokens, not both"):
        load_config(write_config(tmp_path, corpus, train={**train, "batch": 4}))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"dataset": {}}, r"unknown key 'dataset'; did you mean 'datasets'\?"),
        ({"datasets": {"a": {"url": ["x.jsonl"]}}}, r"datasets.a: unknown key 'url'; did you mean 'urls'\?"),
        ({"train": {"weights": {"a": 1, "c": 1}}}, r"train: weights: no dataset named 'c'"),
        (
            {"train": {"weights": {"a": 1}, "shufle": {"window": 4}}},
            r"train: unknown key 'shufle'; did you mean 'shuffle'\?",
        ),
        ({"validation": {"sets": ["vall"]}}, r"validation: sets: no dataset named 'vall'; did you mean 'val'\?"),
        ({"tokenizer": None}, r"datasets.a: missing tokenizer"),
        ({"datasets": {}}, r"datasets: name at least one dataset"),
    ],
)
def test_bad_configs_are_refused_by_name(tmp_path, corpus, changes, message):
    path = write_config(tmp_path, corpus, **changes)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_records_is_the_kind_of_input_and_format_its_older_name(tmp_path, corpus):
    datasets = lambda **a: {"a": {"urls": corpus["a"], **a}, "b": {"urls": corpus["b"]}, "val": {"urls": corpus["val"]}}  # noqa: E731
    named = load_config(write_config(tmp_path, corpus, datasets=datasets(records="pretrain"))).train.stream_fingerprint
    older = load_config(write_config(tmp_path, corpus, datasets=datasets(format="pretrain"))).train.stream_fingerprint
    assert named == older == load_config(write_config(tmp_path, corpus, datasets=datasets())).train.stream_fingerprint
    with pytest.raises(ConfigError, match=r"datasets.a: 'records' is given twice \('format' is its older name\)"):
        load_config(write_config(tmp_path, corpus, datasets=datasets(records="pretrain", format="sft")))
    with pytest.raises(ConfigError, match="records must be pretrain, sft or chat, got 'prose'"):
        load_config(write_config(tmp_path, corpus, datasets=datasets(records="prose")))


def test_beamtok_cache_builds_the_caches_a_config_names(tmp_path, corpus, monkeypatch):
    path = write_config(tmp_path, corpus)
    result = CliRunner().invoke(main, ["cache", "--config", path, "-q"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("a: cache ") and "2 shards" in result.stdout
    assert_items_equal(list(Dataset.from_cache(str(tmp_path / "cache-a"))), list(packed(corpus["a"])))
    tokenized: list[str] = []
    real = ShardProcessor.documents  # every shard the shard processing runs is read through documents()
    monkeypatch.setattr(
        ShardProcessor, "documents", lambda self, shard, *a: (tokenized.append(shard.url), real(self, shard, *a))[1]
    )
    list(itertools.islice(load_config(path).train, 30))
    assert tokenized and not set(tokenized) & set(corpus["a"])  # dataset a comes from its cache
    refused = CliRunner().invoke(main, ["cache", "--config", path, "--seq-len", "32"])
    assert (
        refused.exit_code == 2
        and "is a data config: it names every dataset's options; drop --seq-len" in refused.stderr
    )


def test_the_example_config_loads_and_streams():
    code = (
        "import beamtok, itertools\n"
        "config = beamtok.load_config('examples/data.yaml')\n"
        "batch = next(iter(config.train))\n"
        "assert batch['input_ids'].shape == (8, 1024), batch['input_ids'].shape\n"
        "assert sorted(config.validation) == ['held_out'] and sorted(config.caches) == ['pydocs', 'shakespeare']\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_relative_paths_are_relative_to_the_config_file(tmp_path, corpus, monkeypatch):
    folder = tmp_path / "configs"
    folder.mkdir()
    rel = lambda path: os.path.relpath(path, folder)  # noqa: E731
    config = {
        "tokenizer": rel(TOKENIZER),
        "seq_len": 64,
        "datasets": {"a": {"urls": [rel(u) for u in corpus["a"]], "cache": "caches/a"}},
        "train": {"weights": {"a": 1}, "batch": 2},
    }
    (folder / "data.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path / "configs" / "..")  # anywhere but the file's own directory
    os.makedirs("elsewhere")
    monkeypatch.chdir("elsewhere")
    loaded = load_config(str(folder / "data.yaml"))
    assert [s.url for s in loaded.datasets["a"].shards] == corpus["a"]
    assert loaded.caches == {"a": str(folder / "caches" / "a")}
    assert next(iter(loaded.train))["input_ids"].shape == (2, 64)


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ({"batch": "eight"}, "train: batch: must be a whole number, got 'eight'"),
        ({"shuffle": {"window": 2.5}}, "train: shuffle.window: must be a whole number, got 2.5"),
        ({"seed": "x"}, "train: seed: must be a whole number, got 'x'"),
    ],
)
def test_a_value_of_the_wrong_kind_names_the_file_and_key(tmp_path, corpus, train, message):
    path = write_config(tmp_path, corpus, train={"weights": {"a": 0.5, "b": 0.5}, **train})
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {message}")):
        load_config(path)


def shard_layouts(directory):
    """The codecs and the row-group sizes of every shard file of the cache at ``directory``."""
    import pyarrow.parquet as pq

    codecs, group_rows = set(), set()
    for path in sorted((directory / "shards").glob("*.parquet")):
        meta = pq.ParquetFile(path).metadata
        for g in range(meta.num_row_groups):
            codecs.update(meta.row_group(g).column(c).compression for c in range(meta.num_columns))
            group_rows.add(meta.row_group(g).num_rows)
    return codecs, group_rows


def test_a_config_s_build_options_shape_its_caches(tmp_path, corpus):
    """Build options at the top apply to every cache; a dataset's own win; command-line build
    flags win over both, and the cache written as it streams takes the same layout."""
    datasets = {
        "a": {"urls": corpus["a"], "cache": str(tmp_path / "cache-a"), "row_group_rows": 4},
        "b": {"urls": corpus["b"], "cache": str(tmp_path / "cache-b")},
        "val": {"urls": corpus["val"]},
    }
    path = write_config(
        tmp_path,
        corpus,
        datasets=datasets,
        parquet_compat=True,
        row_group_rows=8,
        split_bytes="none",
        beam_options={"direct_num_workers": 1},
    )
    result = CliRunner().invoke(main, ["cache", "--config", path, "-q"])
    assert result.exit_code == 0, result.output
    codecs_a, rows_a = shard_layouts(tmp_path / "cache-a")
    assert codecs_a == {"SNAPPY"} and max(rows_a) == 4
    codecs_b, rows_b = shard_layouts(tmp_path / "cache-b")
    assert codecs_b == {"SNAPPY"} and max(rows_b) == 8
    assert_items_equal(list(Dataset.from_cache(str(tmp_path / "cache-a"))), list(packed(corpus["a"])))

    flags = CliRunner().invoke(main, ["cache", "--config", path, "-q", "--row-group-rows", "2", "--overwrite"])
    assert flags.exit_code == 0, flags.output
    assert max(shard_layouts(tmp_path / "cache-b")[1]) == 2 and max(shard_layouts(tmp_path / "cache-a")[1]) == 2

    streamed = tmp_path / "streamed"
    datasets["a"]["cache"] = str(streamed)
    config = load_config(write_config(tmp_path, corpus, datasets=datasets, parquet_compat=True))
    assert config.builds["a"]["row_group_rows"] == 4 and config.builds["a"]["parquet_compat"] is True
    list(itertools.islice(config.train, 60))
    codecs, rows = shard_layouts(streamed)
    assert codecs == {"SNAPPY"} and max(rows) == 4  # the cache written as it streams

    with pytest.raises(ConfigError, match=r"datasets.a: row_group_rows: must be a whole number"):
        load_config(
            write_config(tmp_path, corpus, datasets={**datasets, "a": {**datasets["a"], "row_group_rows": "many"}})
        )
    with pytest.raises(ConfigError, match=r"datasets.a: parquet_compat: must be true or false"):
        load_config(write_config(tmp_path, corpus, datasets=datasets, parquet_compat="yes"))

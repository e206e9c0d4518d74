"""Mistakes a new user makes that used to give wrong or empty results, hangs or tracebacks:
each is refused (or warned about) when it is typed, in one line naming what to change."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
from click.testing import CliRunner

from beamtok import ConfigError, Dataset
from beamtok._src.base.sizes import MAX_SEQ_LEN, memory_available
from beamtok._src.cli import main

from conftest import CORPUS, TOKENIZER_DIR

TOKENIZER = str(TOKENIZER_DIR)
TEXT = str(CORPUS / "shakespeare-00.jsonl")


def tokens() -> Dataset:
    return Dataset.from_files(TEXT).tokenize(TOKENIZER)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stderr


def test_a_sequence_length_that_cannot_fit_is_refused_with_what_it_would_need():
    with pytest.raises(
        ConfigError, match=r"seq_len 1,000,000,000 is above the ceiling of 16,777,216 tokens \(it would need 13.0 GB\)"
    ):
        tokens().concat_chunk(1_000_000_000)
    tokens().concat_chunk(MAX_SEQ_LEN)  # the ceiling itself is allowed
    code, err = cli("cache", TEXT, "-o", "/nonexistent/never-made", "--tokenizer", TOKENIZER, "--seq-len", "1000000000")
    assert code == 2 and err.count("\n") == 1 and "seq_len 1,000,000,000 is above the ceiling" in err
    with pytest.raises(ConfigError, match="max_length 100,000,000 is above the ceiling"):
        Dataset.from_files(TEXT).tokenize_sft(TOKENIZER, max_length=100_000_000)


def test_stages_that_would_hold_more_than_the_memory_are_refused():
    available = memory_available()
    assert available is not None  # Linux
    wide = tokens().concat_chunk(MAX_SEQ_LEN)
    rows = available // (MAX_SEQ_LEN * 13) + 1
    with pytest.raises(
        ConfigError,
        match=rf"batch\(\) \({rows:,} rows of {MAX_SEQ_LEN:,} tokens held at once\) would need .* of memory; this machine has",
    ):
        wide.batch(rows)
    with pytest.raises(ConfigError, match=r"shuffle\(\) .* would need"):
        wide.shuffle(rows)
    wide.batch(1)  # one row fits
    with pytest.raises(ConfigError, match="batch size 2,000,000 is above the ceiling"):
        tokens().concat_chunk(8).batch(2_000_000)
    with pytest.raises(ConfigError, match="open_shards \\(interleave\\) 100,000 is above the ceiling"):
        tokens().interleave(100_000)


def test_a_tiny_mix_weight_is_refused_at_once_with_the_smallest_that_works():
    a, b = Dataset.from_sequence(["a"] * 10), Dataset.from_sequence(["b"] * 10)
    with pytest.raises(
        ConfigError,
        match=r"source 1's weight 1e-09 .* block of 1,000,000,001 examples; the smallest share a mix takes is 1/1,048,576",
    ):
        Dataset.mix([a, b], [1, 1e-9])
    with pytest.raises(ConfigError, match="block_size 5,000,000 is above the ceiling"):
        Dataset.mix([a, b], [1, 1], block_size=5_000_000)
    assert Dataset.mix([a, b], [1, 1e-6]).pipeline.root.plan.block_size == 1_000_001


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("file", "is a file, not a directory"),
        ("file/cache", "cannot be created: {tmp}/file is a file, not a directory"),
        ("/proc/beamtok-test/cache", "cannot create or write a directory there"),
    ],
)
def test_an_unusable_output_is_one_line(tmp_path, output, message):
    (tmp_path / "file").write_text("")
    target = output if output.startswith("/") else str(tmp_path / output)
    code, err = cli("cache", TEXT, "-o", target, "--tokenizer", TOKENIZER, "--seq-len", "64", "-q")
    assert code == 2 and err.startswith(f"beamtok: error: {target}: {message.format(tmp=tmp_path)}"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    if not output.startswith("/"):  # caching as it streams refuses it when asked, before any read
        with pytest.raises(Exception, match=message.format(tmp=tmp_path)):
            tokens().concat_chunk(64).cache_as_you_go(target)


def test_silent_empty_or_wrong_results_are_refused_or_warned():
    with pytest.raises(ConfigError, match=r"filter_length\(min_tokens=100, max_tokens=10\) keeps no document"):
        tokens().filter_length(min_tokens=100, max_tokens=10)
    with pytest.raises(
        ConfigError, match=r"tokenize\(\): the documents are already tokenized by tokenize\(\); tokenize once"
    ):
        tokens().tokenize(TOKENIZER)
    with pytest.raises(ConfigError, match="already tokenized"):
        tokens().tokenize_sft(TOKENIZER)
    with pytest.warns(
        UserWarning, match=r"pack_examples\(\) packs whole examples and skips every document longer than seq_len"
    ):
        tokens().pack_examples(64)
    with pytest.warns(
        UserWarning,
        match=r"mix sources make rows of different lengths \(source 0: 64, source 1: 128\): batches will vary",
    ):
        Dataset.mix([tokens().concat_chunk(64), tokens().concat_chunk(128)])


def test_a_missing_extra_is_named_when_the_feature_is_asked_for(monkeypatch, tmp_path):
    packed = tokens().concat_chunk(64)
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # as if Beam were not installed
    with pytest.raises(ConfigError, match=r"^cache\(\) needs Apache Beam: pip install 'beamtok\[beam\]'$"):
        packed.cache(str(tmp_path / "c"))
    code, err = cli("cache", TEXT, "-o", str(tmp_path / "c"), "--tokenizer", TOKENIZER, "--seq-len", "64")
    assert code == 2 and err == "beamtok: error: beamtok cache needs Apache Beam: pip install 'beamtok[beam]'\n"
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(
        ConfigError, match=r"^batch\(tensors=\"torch\"\) needs PyTorch: pip install 'beamtok\[torch\]'$"
    ):
        packed.batch(4, tensors="torch")
    with pytest.raises(ConfigError, match=r"^to_torch\(\) needs PyTorch"):
        packed.to_torch()
    for module in ("beamtok._src.attention", "beamtok._src.trainer"):
        blocked = subprocess.run(
            [sys.executable, "-c", f"import sys; sys.modules['torch'] = None; import {module}"],
            capture_output=True,
            text=True,
        )
        assert blocked.returncode == 1 and blocked.stderr.strip().endswith(
            f"ModuleNotFoundError: {module} needs PyTorch: pip install 'beamtok[torch]'"
        )


def test_names_that_are_nearly_right_get_the_nearest_one(tmp_path):
    from beamtok import InputError

    with pytest.raises(
        InputError, match=r"shakespeare-0\.jsonl: file not found; did you mean '.*shakespeare-0\d\.jsonl'\?"
    ):
        Dataset.from_files(str(CORPUS / "shakespeare-0.jsonl"))
    with pytest.raises(
        ConfigError, match=r"tokenizer '.*gpt2/vocab\.json' is a file: pass the directory that holds it \('.*gpt2'\)"
    ):
        Dataset.from_sequence(["a"]).tokenize(str(TOKENIZER_DIR / "vocab.json"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        ConfigError, match=r"^tokenizer directory '.*empty' holds none of tokenizer.json, .*: not a saved tokenizer$"
    ):
        Dataset.from_sequence(["a"]).tokenize(str(tmp_path / "empty"))
    code, err = cli("stats", str(tmp_path / "cach"), "--tokenizer", TOKENIZER)
    assert code == 2 and err == f"beamtok: error: {tmp_path / 'cach'}: no such file or directory\n"


def test_head_cuts_long_pieces_unless_told_not_to(tmp_path):
    from conftest import cache_without_beam

    directory = str(tmp_path / "c")
    cache_without_beam(tokens().ensure_bos_eos().concat_chunk(512), directory)
    result = CliRunner().invoke(main, ["head", directory, "--batches", "1", "--batch-size", "1"])
    texts = [
        line
        for line in result.stdout.split("\n")[1:]
        if line and not line.startswith(("[", "---", "delivered", "read"))
    ]
    assert (
        result.exit_code == 0
        and "… (+" in result.stdout
        and all(len(line) <= 500 + len("… (+99999 chars)") for line in texts)
    )
    whole = CliRunner().invoke(main, ["head", directory, "--batches", "1", "--batch-size", "1", "--max-chars", "0"])
    assert whole.exit_code == 0 and "… (+" not in whole.stdout


def test_reading_past_the_end_and_unclear_arguments_get_one_line_each():
    short = Dataset.from_files(TEXT).tokenize(TOKENIZER).concat_chunk(1024).batch(8)
    steps = sum(1 for _ in short)
    for past in (10**9, steps):  # the step just past the last one answers as any later step does
        with pytest.raises(
            ConfigError,
            match=rf"iter_at\(step={past}\): this reader's stream has steps 0-{steps - 1}; step {past} is past its end",
        ):
            short.iter_at(past)
    with pytest.warns(UserWarning, match=rf"skip\(1000000000\): the stream ended after {steps} more item"):
        assert short.iter().skip(10**9) == steps
    last = list(short.iter_at(steps - 1))
    assert len(last) == 1 and (last[0]["input_ids"] == list(short)[-1]["input_ids"]).all()
    with pytest.raises(ConfigError, match=r"tokenize\(\) takes a tokenizer directory, a hub name.*got int 42"):
        Dataset.from_files(TEXT).tokenize(42)
    mixed = Dataset.mix([tokens().concat_chunk(64), tokens().concat_chunk(64)], [1, 1])
    with pytest.raises(
        ConfigError,
        match=r"one weight per source, in the order the mix was given its sources \(2 numbers\), not a dict",
    ):
        mixed.iter().set_weights({"web": 1})
    it = short.iter()
    next(it)
    state = it.state_dict()
    del state["pipeline"]
    from beamtok import StateError

    with pytest.raises(StateError, match=r"the state lacks keys \['pipeline'\]"):
        short.iter(state)


def test_a_typo_in_a_local_tokenizer_path_that_reads_as_a_hub_name_gets_the_local_directory(tmp_path, monkeypatch):
    from huggingface_hub import constants

    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "gpt2").symlink_to(TOKENIZER_DIR, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # no network probe: the answer is the same
    with pytest.raises(
        ConfigError, match=r"a local directory 'tok' exists but holds no 'gpt3'; did you mean 'tok/gpt2'\?"
    ):
        Dataset.from_files(TEXT).tokenize("tok/gpt3")
    Dataset.from_files(TEXT).tokenize("tok/gpt2")  # the directory itself loads


def test_a_token_budget_below_the_row_length_is_warned_about_once():
    rows = Dataset.from_files(TEXT).tokenize(TOKENIZER).pack_power_of_two(1024)
    with pytest.warns(
        UserWarning, match=r"batch_tokens\(100\): a row of 1,024 tokens is over the budget of one batch"
    ) as said:
        list(itertools.islice(rows.batch_tokens(100), 20))
    assert len([w for w in said if "over the budget" in str(w.message)]) == 1
    cut = next(iter(rows.batch_tokens(100, max_len=100, min_len=4)))  # cut into pieces that fit
    assert cut["input_ids"].size <= 128 and cut["input_ids"].shape[1] <= 100

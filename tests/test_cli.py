"""The command line as a user meets it: strict options, log levels, stats, inspect, head."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from beamtok import Dataset
from beamtok.cli import main
from beamtok.errors import ConfigError

from conftest import CORPUS, TOKENIZER_DIR

TOKENIZER = str(TOKENIZER_DIR)
SHARD = str(CORPUS / "shakespeare-00.jsonl")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        (["--text-feild=body"], "no such option: --text-feild (neither a beamtok option nor a Beam pipeline option); did you mean --text-field?"),
        (["--seqlen", "512"], "no such option: --seqlen (neither a beamtok option nor a Beam pipeline option); did you mean --seq-len?"),
        (["--owerwrite"], "no such option: --owerwrite (neither a beamtok option nor a Beam pipeline option); did you mean --overwrite?"),
        (["--direct_num_wokers=2"], "did you mean --direct_num_workers?"),
        (["--zzzz"], "no such option: --zzzz (neither a beamtok option nor a Beam pipeline option)"),
        (["--direct_num_workers=two"], "Beam option: argument --direct_num_workers: invalid int value: 'two'"),
        (["--direct_running_mode=bogus"], "invalid choice: 'bogus'"),
        (["--runner"], "Beam option --runner needs a value (--runner=VALUE)"),
    ],
)
def test_cache_refuses_options_neither_beamtok_nor_beam_knows(tmp_path, typed, message):
    code, out, err = run("cache", SHARD, "-o", str(tmp_path / "c"), "--tokenizer", TOKENIZER, "--seq-len", "64", *typed)
    assert code == 2, out + err
    assert err.startswith("beamtok: error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c").exists()  # nothing was built


def test_beam_options_are_split_from_urls_by_beams_parser():
    from beamtok.beam.options import split_command_line

    tokens = [SHARD, "--runner", "DirectRunner", "b.jsonl", "--direct_num_workers", "2", "--save_main_session", "--job_name=x"]
    urls, beam = split_command_line(tokens, ["--output"])
    assert urls == [SHARD, "b.jsonl"]
    assert beam == ["--runner", "DirectRunner", "--direct_num_workers", "2", "--save_main_session", "--job_name=x"]


def test_yaml_beam_options_and_python_beam_options_are_checked(tmp_path):
    config = tmp_path / "cache.yaml"
    config.write_text(f"urls: [{SHARD}]\noutput: {tmp_path / 'c'}\ntokenizer: {TOKENIZER}\nseq-len: 64\nbeam_options:\n  direct_num_wrkers: 1\n")
    code, _, err = run("cache", "--config", str(config))
    assert code == 2 and f"{config}: beam_options: no such option: --direct_num_wrkers" in err and "--direct_num_workers?" in err
    ds = Dataset.from_files([SHARD]).tokenize(TOKENIZER).concat_chunk(64)
    with pytest.raises(ConfigError, match="did you mean --direct_running_mode"):
        ds.cache(str(tmp_path / "c"), direct_runing_mode="in_memory")
    assert not (tmp_path / "c").exists()

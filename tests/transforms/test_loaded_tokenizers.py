"""A tokenizer directory loaded once through transformers is read back on this machine without
it, and what is read back is what transformers makes of exactly those files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from beamtok._src.base.kept_json import TOKENIZER_CACHE_ENV, cache_root
from beamtok._src.transforms.tokenize import Tokenizer
from beamtok._src.transforms.tokenizer_registry import load_tokenizer

from conftest import ROOT, TOKENIZER_DIR, trained_family

TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"

# loads each directory named on the command line; prints what beamtok took from it and
# whether transformers was imported to get it
LOAD = """
import json, sys
from beamtok import load_tokenizer
out = []
for directory in sys.argv[1:]:
    tok = load_tokenizer(directory)
    out.append([tok.serialize(), tok.vocab_size, tok.chat_template, tok.encode_batch(["Hello, world: 1999!"], engine="tokenizers")[0].tolist()])
print(json.dumps({"transformers": "transformers" in sys.modules, "loaded": out}))
"""


def load_in_new_process(directories: list[str], cache: Path) -> dict:
    env = {**os.environ, TOKENIZER_CACHE_ENV: str(cache)}
    done = subprocess.run([sys.executable, "-c", LOAD, *directories], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def with_chat_template(tmp_path: Path) -> str:
    directory = tmp_path / "gpt2-chat"
    shutil.copytree(TOKENIZER_DIR, directory)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(
        json.dumps({**config, "chat_template": TEMPLATE, "pad_token": "<|endoftext|>"})
    )
    return str(directory)


@pytest.mark.slow  # new processes and the trained families: make test-fast leaves it out
def test_a_kept_tokenizer_is_what_transformers_loads_and_a_new_process_reads_it_without_transformers(
    tmp_path: Path,
) -> None:
    directories = [
        str(TOKENIZER_DIR),
        with_chat_template(tmp_path),
        *(str(trained_family(kind)) for kind in ("wordpiece", "unigram", "sp-bpe-metaspace")),
    ]
    cache = tmp_path / "kept"
    first = load_in_new_process(directories, cache)
    second = load_in_new_process(directories, cache)
    assert first["transformers"] and not second["transformers"]
    assert second["loaded"] == first["loaded"]
    assert len(list(cache.glob("*.json"))) == len(directories)
    assert first["loaded"][1][2] == TEMPLATE
    from transformers import AutoTokenizer

    for directory, (serialized, vocab_size, template, _) in zip(directories, second["loaded"]):
        hf = AutoTokenizer.from_pretrained(directory)
        want = Tokenizer.from_hf(hf, directory)
        assert serialized == want.serialize() and vocab_size == len(hf) and template == want.chat_template, directory


def test_a_changed_file_is_loaded_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKENIZER_CACHE_ENV, str(tmp_path / "kept"))
    directory = tmp_path / "gpt2"
    shutil.copytree(TOKENIZER_DIR, directory)
    before = load_tokenizer(str(directory))
    assert before.chat_template is None and len(list(cache_root().glob("*.json"))) == 1
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": TEMPLATE}))
    after = load_tokenizer(str(directory) + "/")  # another name: this process's own memo is not asked
    assert after.chat_template == TEMPLATE
    (directory / "added_tokens.json").write_text(json.dumps({"<|pad|>": 50257}))
    added = load_tokenizer(str(directory) + "//")
    assert added.vocab_size == 50258 and added.fingerprint != after.fingerprint
    assert len(list(cache_root().glob("*.json"))) == 3


def test_a_broken_entry_is_loaded_anew_and_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKENIZER_CACHE_ENV, str(tmp_path / "kept"))
    directory = tmp_path / "gpt2"
    shutil.copytree(TOKENIZER_DIR, directory)
    want = load_tokenizer(str(directory)).serialize()
    (entry,) = cache_root().glob("*.json")
    entry.write_text('{"backend_json": "{not json')
    assert load_tokenizer(str(directory) + "/").serialize() == {**want, "name": str(directory) + "/"}
    assert json.loads(entry.read_text())["backend_json"] == want["tokenizer_json"]


def test_a_cache_that_cannot_be_written_and_remote_code_keep_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(TOKENIZER_CACHE_ENV, str(blocker / "kept"))
    directory = tmp_path / "gpt2"
    shutil.copytree(TOKENIZER_DIR, directory)
    assert load_tokenizer(str(directory)).encode_batch(["Hello"])[0].tolist() == [15496]
    monkeypatch.setenv(TOKENIZER_CACHE_ENV, str(tmp_path / "kept"))
    load_tokenizer(str(directory) + "/", trust_remote_code=True)
    assert not (tmp_path / "kept").exists()


def test_a_hub_name_in_the_hugging_face_cache_is_kept_by_its_snapshot(tmp_path: Path) -> None:
    """A hub name whose files are in the Hugging Face cache (laid out as the hub client lays
    them out: refs/main naming a snapshot) is kept by that snapshot's files, under its name."""
    repo = tmp_path / "hub" / "models--local--gpt2"
    snapshot = repo / "snapshots" / "0123abc"
    shutil.copytree(TOKENIZER_DIR, snapshot)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc")
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HUB_OFFLINE": "1",
        TOKENIZER_CACHE_ENV: str(tmp_path / "kept"),
    }
    runs = [
        subprocess.run([sys.executable, "-c", LOAD, "local/gpt2"], capture_output=True, text=True, cwd=ROOT, env=env)
        for _ in range(2)
    ]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr[-2000:] + runs[1].stderr[-2000:]
    first, second = (json.loads(run.stdout.splitlines()[-1]) for run in runs)
    assert first["transformers"] and not second["transformers"]
    assert second["loaded"] == first["loaded"] and second["loaded"][0][0]["name"] == "local/gpt2"
    assert second["loaded"][0][0]["fingerprint"] == load_tokenizer(str(TOKENIZER_DIR)).fingerprint

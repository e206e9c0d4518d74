"""A tokenizer file's own truncation and padding never cut or pad a document.

Distributed ``tokenizer.json`` files often carry ``"truncation": {"max_length": 128, ...}`` and
``"padding": {"strategy": {"Fixed": 128}, ...}`` (BERT-family and sentence-transformers files,
some LLM files). ``transformers`` encodes whole texts unless asked; beamtok must too, on every
engine, in the load probes, the stream and the cache.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from beamtok import Dataset
from beamtok._src.base.errors import ConfigError
from beamtok._src.cli import main
from beamtok._src.transforms.tokenize import Tokenizer
from beamtok._src.transforms.tokenizer_registry import load_tokenizer

from conftest import ROOT, TOKENIZER_DIR, real_paragraphs, write_jsonl

BERT_DIR = ROOT / "data" / "tokenizers" / "bert-base-uncased"
TRUNCATION = {"direction": "Right", "max_length": 128, "strategy": "LongestFirst", "stride": 0}
PADDING = {
    "strategy": {"Fixed": 128},
    "direction": "Right",
    "pad_to_multiple_of": None,
    "pad_id": 0,
    "pad_type_id": 0,
    "pad_token": "[PAD]",
}


def with_length_settings(
    source: Path, target: Path, *, truncation: bool = True, padding: bool = True, pad_id: int = 0
) -> str:
    """A copy of the tokenizer directory ``source`` whose tokenizer.json sets truncation to 128
    tokens and fixed padding to 128, as distributed files set them."""
    if (source / "tokenizer.json").exists():
        shutil.copytree(source, target)
    else:  # a vocab/merges directory (the shipped GPT-2): its tokenizer.json as transformers saves it
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(source)).save_pretrained(str(target))
    path = target / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["truncation"] = dict(TRUNCATION) if truncation else None
    data["padding"] = {**PADDING, "pad_id": pad_id} if padding else None
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(target)


@pytest.fixture(autouse=True)
def nothing_kept(tmp_path, monkeypatch):
    """Loaded through transformers here, not from what another run kept on this machine."""
    monkeypatch.setenv("BEAMTOK_TOKENIZER_CACHE", str(tmp_path / "kept"))


@pytest.fixture(scope="module")
def bert_cut(tmp_path_factory) -> str:
    return with_length_settings(BERT_DIR, tmp_path_factory.mktemp("tok") / "bert-cut")


@pytest.fixture(scope="module")
def long_text() -> str:
    return "\n\n".join(real_paragraphs(40))


def test_whole_documents_as_transformers_encodes_them(bert_cut, long_text):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(bert_cut)
    texts = [long_text, "short one"]
    want = [hf(t)["input_ids"] for t in texts]
    assert len(want[0]) > 700 and len(want[1]) == 4  # transformers neither cuts nor pads
    tok = load_tokenizer(bert_cut)
    for engine in ("auto", "tokenizers", "exact"):
        got = [ids.tolist() for ids in tok.encode_batch(texts, engine=engine)]
        assert got == want, engine
    assert tok.engine_choice.encoder is not None, tok.engine  # the probe no longer sees padding: the fast engine runs


def test_the_callers_backend_is_left_as_it_was(bert_cut):
    from tokenizers import Tokenizer as RustTokenizer

    backend = RustTokenizer.from_file(str(Path(bert_cut) / "tokenizer.json"))
    tok = Tokenizer(backend, "bert-cut", 101, 102, 0)
    assert backend.truncation is not None and backend.padding is not None
    assert tok.backend.truncation is None and tok.backend.padding is None


def test_a_byte_level_file_with_truncation_keeps_whole_documents(tmp_path, long_text):
    cut = with_length_settings(TOKENIZER_DIR, tmp_path / "gpt2-cut", pad_id=50256)
    plain = load_tokenizer(str(TOKENIZER_DIR))
    tok = load_tokenizer(cut)
    assert tok.encode_batch([long_text])[0].tolist() == plain.encode_batch([long_text])[0].tolist()
    assert tok.fingerprint == plain.fingerprint  # the same tokenizer once its file's length settings are off


def test_stream_and_cache_keep_every_token(bert_cut, long_text, tmp_path):
    docs = write_jsonl(tmp_path / "two.jsonl", [{"text": long_text}, {"text": "short one"}])
    tok = load_tokenizer(bert_cut)
    want = [ids.tolist() for ids in tok.encode_batch([long_text, "short one"], engine="tokenizers")]
    stream = Dataset.from_files([str(docs)]).tokenize(bert_cut)
    got = [example["input_ids"].tolist() for example in stream.iter()]
    assert got == want
    assert 0 not in got[1]  # no [PAD] inside a document
    code = CliRunner().invoke(
        main,
        [
            "cache",
            str(docs),
            "-o",
            str(tmp_path / "cache"),
            "--tokenizer",
            bert_cut,
            "--seq-len",
            "256",
            "--no-bos",
            "--no-eos",
            "-q",
        ],
    )
    assert code.exit_code == 0, code.output
    manifest = json.loads((tmp_path / "cache" / "manifest.json").read_text())
    assert manifest["totals"]["documents"]["truncated"] == 0
    assert manifest["totals"]["tokens"] == sum(len(ids) for ids in want)
    rows = [r["input_ids"] for r in Dataset.from_cache(str(tmp_path / "cache")).iter()]
    assert np.concatenate(rows)[: sum(map(len, want))].tolist() == want[0] + want[1]


def test_a_state_or_cache_made_while_the_file_cut_documents_is_refused(bert_cut):
    from tokenizers import Tokenizer as RustTokenizer

    tok = load_tokenizer(bert_cut)
    old_json = (Path(bert_cut) / "tokenizer.json").read_text(encoding="utf-8")  # what an older beamtok serialized
    import hashlib

    old_fingerprint = hashlib.sha256(
        (RustTokenizer.from_str(old_json).to_str() + json.dumps([101, 102, 0])).encode()
    ).hexdigest()[:20]
    assert old_fingerprint != tok.fingerprint
    blob = {**tok.serialize(), "tokenizer_json": old_json, "fingerprint": old_fingerprint}
    with pytest.raises(ConfigError, match="kept the tokenizer file's own truncation or padding"):
        Tokenizer.from_serialized(blob)
    from beamtok._src.transforms.tokenizer_registry import resolve_tokenizer

    with pytest.raises(ConfigError, match="its files changed"):
        resolve_tokenizer(tok.ref().__class__(bert_cut, old_fingerprint, 101, 102, 0))

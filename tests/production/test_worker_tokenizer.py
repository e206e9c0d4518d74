"""Beam workers rebuild a serialized tokenizer once per process, not once per DoFn instance."""

from __future__ import annotations

import beamtok._src.transforms.tokenize as tokenize
import beamtok._src.transforms.tokenizer_registry as registry
from beamtok import load_tokenizer
from beamtok._src.transforms import tokenizer_registry

from conftest import TOKENIZER_DIR


def test_serialized_tokenizer_is_rebuilt_once_per_process(monkeypatch):
    tok = load_tokenizer(str(TOKENIZER_DIR))
    blob = tok.serialize()
    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})  # a fresh worker process: nothing loaded yet
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    rebuilt = []
    real = tokenize.Tokenizer.from_serialized

    def counting(blob):
        rebuilt.append(blob["fingerprint"])
        return real(blob)

    monkeypatch.setattr(tokenize.Tokenizer, "from_serialized", counting)
    for _ in range(6):  # six DoFn instances set up in one SDK process
        registry.register_serialized([blob])
    assert rebuilt == [tok.fingerprint]
    shared = registry.resolve_tokenizer(tok.ref())
    assert shared is registry.resolve_tokenizer(tok.ref()) and shared is not tok
    assert shared.encode_batch(["Hello there"])[0].tolist() == tok.encode_batch(["Hello there"])[0].tolist()


def test_a_tokenizer_is_serialized_once_and_not_pickled_with_its_blob():
    """Each Beam build ships the tokenizer: its file is written out once a process, and a
    copy handed to another process (pickled) carries no such blob."""
    import pickle

    tok = load_tokenizer(str(TOKENIZER_DIR))
    first, second = tok.serialize(), tok.serialize()
    assert first == second and first is not second  # a caller may change its own copy
    assert first["tokenizer_json"] is second["tokenizer_json"]  # the file's text made once
    assert pickle.loads(pickle.dumps(tok)).__dict__["_shipped"] is None

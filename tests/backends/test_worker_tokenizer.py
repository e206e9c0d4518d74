"""Beam workers rebuild a serialized tokenizer once per process, not once per DoFn instance."""

from __future__ import annotations

import beamtok.transforms.tokenize as tokenize
from beamtok import load_tokenizer

from conftest import TOKENIZER_DIR


def test_serialized_tokenizer_is_rebuilt_once_per_process(monkeypatch):
    tok = load_tokenizer(str(TOKENIZER_DIR))
    blob = tok.serialize()
    monkeypatch.setattr(tokenize, "_CACHE", {})  # a fresh worker process: nothing loaded yet
    monkeypatch.setattr(tokenize, "_BY_NAME", {})
    rebuilt = []
    real = tokenize.Tokenizer.from_serialized

    def counting(blob):
        rebuilt.append(blob["fingerprint"])
        return real(blob)

    monkeypatch.setattr(tokenize.Tokenizer, "from_serialized", counting)
    for _ in range(6):  # six DoFn instances set up in one SDK process
        tokenize.register_serialized([blob])
    assert rebuilt == [tok.fingerprint]
    shared = tokenize.resolve_tokenizer(tok.ref())
    assert shared is tokenize.resolve_tokenizer(tok.ref()) and shared is not tok
    assert shared.encode_batch(["Hello there"])[0].tolist() == tok.encode_batch(["Hello there"])[0].tolist()

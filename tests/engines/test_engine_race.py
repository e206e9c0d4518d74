"""The set-up race (``engines/engine_timing``): an exact engine slower than ``tokenizers`` on
the race texts is refused by kind ``slower``, said once, and the next candidate (or
``tokenizers`` itself) encodes; the ids are the file's whichever wins."""

from __future__ import annotations

import logging
import time

import pytest

from beamtok import load_tokenizer
from beamtok._src.engines import engine_choice
from beamtok._src.engines.engine_choice import SLOWER, choose
from beamtok._src.engines.engine_timing import RACE_ENV, race_on, race_texts, slower_than_tokenizers
from beamtok._src.engines.exact_encoder import ExactEncoder

from conftest import ROOT

BERT = ROOT / "data" / "tokenizers" / "bert-base-uncased"
PAUSE = 0.3  # seconds a planted slow engine waits a call: far past tokenizers' time on the race texts


@pytest.fixture
def race(monkeypatch):
    monkeypatch.setenv(RACE_ENV, "1")
    monkeypatch.setattr(engine_choice, "_WARNED", set())


def test_the_race_is_on_unless_turned_off(monkeypatch):
    monkeypatch.setenv(RACE_ENV, "1")
    assert race_on()
    for off in ("0", "off", "false"):
        monkeypatch.setenv(RACE_ENV, off)
        assert not race_on()


def test_race_texts_hold_every_kind_and_are_the_same_each_time():
    texts = race_texts()
    joined = "".join(texts)
    assert len(texts) == 48 and 30_000 < len(joined) < 120_000
    for sample in ("def ", "1,284,905.17", "ß", "Вчера", "我们", "カレー", "어제", "السوق", "बाज़ार", "🚀"):
        assert sample in joined, sample
    race_texts.cache_clear()
    assert race_texts() == texts


def test_a_slower_engine_is_refused_and_tokenizers_encodes(race, monkeypatch, caplog):
    """Planted: every exact engine waits before each batch. WordPiece's candidates (kitoken,
    cached words) must each lose the race and ``tokenizers`` encode, said once."""
    encode = ExactEncoder.encode_batch

    def slow(self, texts, add_special_tokens=True):
        time.sleep(PAUSE)
        return encode(self, texts, add_special_tokens)

    monkeypatch.setattr(ExactEncoder, "encode_batch", slow)
    bert = load_tokenizer(str(BERT))
    with caplog.at_level(logging.WARNING, logger=engine_choice.__name__):
        choice = choose(bert.backend, "bert planted slow", bert.backend.to_str())
        again = choose(bert.backend, "bert planted slow", bert.backend.to_str())
    assert choice.encoder is None and choice.engine == "tokenizers"
    assert [(r.candidate, r.kind) for r in choice.refused] == [("kitoken", SLOWER), ("cached words", SLOWER)]
    assert "slower than tokenizers" in caplog.text and "as fast as tokenizers" in choice.refused[0].reason
    assert caplog.text.count("kitoken engine") == 1  # said once, though chosen twice
    assert again.encoder is None


def test_the_race_reads_its_timings_the_right_way_round(race):
    """An engine that waits before each batch is slower however loaded the machine; the
    reason gives the ratio below one."""
    bert = load_tokenizer(str(BERT))

    class Slow:
        def encode_batch(self, texts, add_special_tokens):
            time.sleep(PAUSE)
            return bert.backend.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens)

    reason = slower_than_tokenizers(Slow(), bert.backend)
    assert reason is not None and reason.startswith("it encodes 0.")

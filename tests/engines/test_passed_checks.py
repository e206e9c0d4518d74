"""A pass of the compiled byte-level engine's split-sample check is remembered on the machine
(``engines/passed_checks``): a later load of the same file with the same rule skips it; another
file, another rule, or a refusal is checked afresh; the classes of characters learned are kept
the same way."""

from __future__ import annotations

import json

import pytest

from beamtok._src.engines import byte_level_encoder
from beamtok._src.engines.byte_level_encoder import CompiledByteLevelEncoder
from beamtok._src.engines.char_classes import CharClasses
from beamtok._src.engines.exact_encoder import ExactEncoder, ProbeMismatch
from beamtok._src.engines.passed_checks import CHECKS_ENV, passed_before
from beamtok._src.engines.ranks import CL100K_PATTERN, QWEN2_PATTERN, tokenizer_json_from_ranks
from beamtok._src.engines.split_patterns import split_sample
from beamtok._src.engines.split_rules import split_rule_of

ENGINE = "beamtok compiled byte-level BPE on the file's split"


@pytest.fixture
def marks(tmp_path, monkeypatch):
    monkeypatch.setenv(CHECKS_ENV, str(tmp_path / "marks"))
    return tmp_path / "marks"


@pytest.fixture(scope="module")
def cl100k_json() -> str:
    """cl100k's split over a small vocabulary (every byte and a few merges): the checks are
    the same, on far smaller tables."""
    ranks = {bytes([b]): b for b in range(256)}
    for token in (b"th", b"he", b" t", b" th", b" the", b"in", b"ing", b"12", b"123", b"\n\n"):
        ranks[token] = len(ranks)
    return tokenizer_json_from_ranks(ranks, CL100K_PATTERN, {})


def sample_checks(monkeypatch) -> list[int]:
    """Counts each time the split sample is compared."""
    seen: list[int] = []
    compare = ExactEncoder.first_difference

    def counted(self, texts, special):
        if texts is split_sample():
            seen.append(1)
        return compare(self, texts, special)

    monkeypatch.setattr(ExactEncoder, "first_difference", counted)
    return seen


def test_a_pass_is_remembered_and_the_next_load_skips_the_sample(marks, monkeypatch, cl100k_json):
    seen = sample_checks(monkeypatch)
    CompiledByteLevelEncoder(cl100k_json, "first")
    assert len(seen) == 1 and len([p for p in marks.iterdir() if not p.name.startswith("char-classes")]) == 1
    assert passed_before(ENGINE, cl100k_json, repr(split_rule_of(CL100K_PATTERN)))
    CompiledByteLevelEncoder(cl100k_json, "second")
    assert len(seen) == 1  # skipped: the same file, rule and code


def test_another_file_or_rule_is_checked_again(marks, monkeypatch, cl100k_json):
    seen = sample_checks(monkeypatch)
    CompiledByteLevelEncoder(cl100k_json, "cl100k")
    spec = json.loads(cl100k_json)
    spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN2_PATTERN
    CompiledByteLevelEncoder(json.dumps(spec), "cl100k split as qwen2")
    assert len(seen) == 2
    qwen2 = split_rule_of(QWEN2_PATTERN)
    monkeypatch.setattr(byte_level_encoder, "split_rule_of_sequence", lambda patterns: qwen2)  # planted: another rule
    with pytest.raises(ProbeMismatch):  # "123" cut digit by digit: its probes differ
        CompiledByteLevelEncoder(cl100k_json, "wrong rule")


def test_a_refusal_is_never_remembered(marks, monkeypatch, cl100k_json):
    """Planted: the sample check fails once. Nothing is kept, and the next load checks again."""
    seen = sample_checks(monkeypatch)
    compare = ExactEncoder.first_difference
    monkeypatch.setattr(
        ExactEncoder,
        "first_difference",
        lambda self, texts, special: "planted" if texts is split_sample() else compare(self, texts, special),
    )
    with pytest.raises(ProbeMismatch, match="planted"):
        CompiledByteLevelEncoder(cl100k_json, "refused")
    assert not marks.exists() or not list(marks.iterdir())
    monkeypatch.setattr(ExactEncoder, "first_difference", compare)
    seen = sample_checks(monkeypatch)
    CompiledByteLevelEncoder(cl100k_json, "checked again")
    assert len(seen) == 1


def test_off_keeps_nothing(tmp_path, monkeypatch, cl100k_json):
    monkeypatch.setenv(CHECKS_ENV, "off")
    seen = sample_checks(monkeypatch)
    CompiledByteLevelEncoder(cl100k_json, "one")
    CompiledByteLevelEncoder(cl100k_json, "two")
    assert len(seen) == 2


def test_learned_classes_are_kept_for_the_next_process(marks, monkeypatch):
    """Characters learned in one process are loaded by the next (a fresh CharClasses, here)
    without asking the file again; another split keeps its own; ``off`` keeps nothing."""
    rule = split_rule_of(CL100K_PATTERN)
    first = CharClasses(CL100K_PATTERN, rule)
    text = "ᚠᚢᚦ runes, 𐌰𐌱 gothic, 漢字 ٣٤"
    first.cut(text)
    first._keep(0, at_exit=True)  # what the process's exit writes
    asked: list[str] = []
    original = CharClasses._asked_class
    monkeypatch.setattr(CharClasses, "_asked_class", lambda self, c: asked.append(c) or original(self, c))
    second = CharClasses(CL100K_PATTERN, rule)
    assert second.cut(text) == first.cut(text) and not asked  # nothing asked again
    assert (second.table == first.table).all()
    CharClasses(QWEN2_PATTERN, split_rule_of(QWEN2_PATTERN)).cut(text)
    assert set(asked) >= set("ᚠᚢᚦ漢字")  # another split learns for itself
    monkeypatch.setenv(CHECKS_ENV, "off")
    asked.clear()
    CharClasses(CL100K_PATTERN, rule).cut(text)
    assert set(asked) >= set("ᚠᚢᚦ漢字")

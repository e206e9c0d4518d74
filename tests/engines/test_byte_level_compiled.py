"""The compiled byte-level BPE (``engines/byte_level_split``, ``char_classes``, ``byte_level_native``,
``byte_level_encoder``): cl100k's split cut as ``tokenizers`` cuts each known spelling, the
classes of characters asked of the file's own split and checked, and the ids of
``tokenizers`` for cl100k's ranks under each spelling. Its whole-corpus and adversarial runs
are in test_fast_path_byte_level and test_fast_path_as_downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Regex, pre_tokenizers

from beamtok import load_tokenizer
from beamtok._src.engines import byte_level_encoder, byte_level_native, char_classes, engine_choice
from beamtok._src.engines.byte_level_encoder import CompiledByteLevelEncoder
from beamtok._src.engines.byte_level_file import GPT2_PATTERN, PROBES
from beamtok._src.engines.byte_level_split import KIND, LETTER, OTHER, ROUTED
from beamtok._src.engines.char_classes import CharClasses
from beamtok._src.engines.exact_encoder import ExactEncoder, OtherForm, ProbeMismatch
from beamtok._src.engines.ranks import CL100K_PATTERN, O200K_PATTERN, QWEN2_PATTERN
from beamtok._src.engines.split_patterns import CL100K_TIKTOKEN_OLDER, CL100K_TODAY, split_sample
from beamtok._src.engines.split_rules import split_rule_of, split_rule_of_sequence
from beamtok._src.transforms import tokenizer_registry

from byte_level_files import assert_cuts_like_the_file, built_from_ranks, shipped_texts, short_texts
from conftest import modules_blocked, on_threads

SPELLED = {
    "cl100k": CL100K_PATTERN,
    "qwen2": QWEN2_PATTERN,
    "cl100k-today": CL100K_TODAY,
    "cl100k-tiktoken-0.5": CL100K_TIKTOKEN_OLDER,
    "gpt2": GPT2_PATTERN,
    "o200k": O200K_PATTERN,
}
ENGINE = "beamtok compiled byte-level BPE on the file's split"

TEXT = short_texts("'sSdtTlLvVeErRſ \n\r\t1٣½!/\u3000\u00a0\u0558\u0301ǅʰ中")


def file_split(pattern: str):
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)


@pytest.fixture(scope="module")
def cl100k_files(tmp_path_factory) -> dict[str, str]:
    """cl100k's ranks under each spelling the engine knows (the file ranks.py writes, its
    Split pattern replaced)."""
    source = Path(built_from_ranks("cl100k"))
    root = tmp_path_factory.mktemp("spellings")
    files = {}
    for name, pattern in SPELLED.items():
        spec = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
        spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = pattern
        directory = root / name
        directory.mkdir()
        (directory / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
        (directory / "tokenizer_config.json").write_text((source / "tokenizer_config.json").read_text())
        files[name] = str(directory)
    return files


@pytest.mark.parametrize("name", list(SPELLED))
def test_the_cut_is_the_files_on_the_split_sample(name):
    pattern = SPELLED[name]
    classes, split = CharClasses(pattern, split_rule_of(pattern)), file_split(pattern)
    differ = [text for text in split_sample() if classes.cut(text) != [p for p, _ in split.pre_tokenize_str(text)]]
    assert not differ, f"{len(differ)} cut otherwise, first {differ[0]!r}"


@pytest.mark.parametrize("name", list(SPELLED))
def test_the_cut_is_the_files_on_any_text(name):
    pattern = SPELLED[name]
    classes, split = CharClasses(pattern, split_rule_of(pattern)), file_split(pattern)

    assert_cuts_like_the_file(classes, split, TEXT, 400)


def test_classes_are_the_files_own_not_pythons():
    """U+0558 is a letter to the ``regex`` module's (newer) tables and not to Oniguruma's;
    ``ſ`` folds to ``s``, so ``'ſ`` is a contraction to the file's split."""
    import regex

    classes = CharClasses(CL100K_TODAY, split_rule_of(CL100K_TODAY))
    assert regex.match(r"\p{L}", "\u0558")
    assert (
        classes.cut("'\u0558x")
        == ["'\u0558", "x"]
        == [p for p, _ in file_split(CL100K_TODAY).pre_tokenize_str("'\u0558x")]
    )
    assert classes.table[0x558] & KIND == OTHER
    assert classes.cut("it'ſx") == ["it", "'ſ", "x"]
    assert classes.table[ord("ſ")] & KIND == LETTER


def test_a_class_answered_wrong_is_caught_and_its_character_routed(monkeypatch):
    """Planted: the split's answer for ``٣`` (a number) read as a letter. The check of its
    contexts must catch it: the character is then sent to the file, never cut wrong."""
    asked = CharClasses._asked_class
    monkeypatch.setattr(CharClasses, "_asked_class", lambda self, c: LETTER if c == "٣" else asked(self, c))
    classes = CharClasses(CL100K_PATTERN, split_rule_of(CL100K_PATTERN))
    classes.learn(np.array([ord("٣"), ord("é")], dtype=np.uint32))
    assert classes.table[ord("٣")] & KIND == ROUTED
    assert classes.table[ord("é")] & KIND == LETTER  # checked in the same batch, and right
    with pytest.raises(ValueError, match="does not take"):
        classes.cut("a٣")


def test_a_routed_character_sends_its_text_to_the_file(cl100k_files, monkeypatch):
    asked = CharClasses._asked_class
    monkeypatch.setattr(CharClasses, "_asked_class", lambda self, c: ROUTED if c == "é" else asked(self, c))
    monkeypatch.setattr(char_classes, "_SHARED", {})  # classes learned afresh, with the plant
    tok = load_tokenizer(cl100k_files["cl100k-today"])
    encoder = ExactEncoder(CompiledByteLevelEncoder(tok.backend.to_str(), "planted", reference=tok.backend))
    texts = ["café 12345", "plain text", "é" * 70]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    assert [ids.tolist() for ids in encoder.encode_batch(texts, add_special_tokens=False)] == want
    assert encoder.engine.native.encode(texts)[0] is None and encoder.engine.native.encode(texts)[1] is not None


@pytest.mark.parametrize("name", list(SPELLED))
def test_ids_are_the_files_for_each_spelling(cl100k_files, name):
    tok = load_tokenizer(cl100k_files[name])
    assert tok.engine.startswith(ENGINE), tok.engine
    texts = [*shipped_texts()[::6], *PROBES, "x 1234567 y", "end\n ", "a\n \n", "'S 'LL 'vE 'ſ", "٣٤٥٦٧ ½½½½"]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    got = tok.encode_batch(texts, add_special_tokens=False)
    differ = [t for t, a, b in zip(texts, want, got) if a != b.tolist()]
    assert not differ, f"{name}: {len(differ)} differ, first {differ[0][:80]!r}"


def test_characters_met_later_are_learned_and_encoded(cl100k_files, monkeypatch):
    """A batch whose characters were never seen: the kernel stops at each such text, the
    classes are learned, and the batch comes out whole and exact."""
    monkeypatch.setattr(char_classes, "_SHARED", {})  # nothing learned by other tests
    tok = load_tokenizer(cl100k_files["cl100k-today"])
    encoder = ExactEncoder(CompiledByteLevelEncoder(tok.backend.to_str(), "fresh", reference=tok.backend))
    table = encoder.engine.native.classes.table
    texts = ["ascii only", "ᚠᚢᚦ runes ᚨᚱ", "plain", "𐌰𐌱 gothic 𐌲 99999", "Ꭰ cherokee Ꭱ"]
    assert table[ord("ᚠ")] == 0 and table[0x10330] == 0  # not met yet
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    assert [ids.tolist() for ids in encoder.encode_batch(texts, add_special_tokens=False)] == want
    assert table[ord("ᚠ")] & KIND == LETTER and table[0x10330] & KIND == LETTER


def test_threads_encode_at_once_and_a_small_cache_starts_over(cl100k_files, monkeypatch):
    monkeypatch.setattr(byte_level_native, "CACHE_BITS", 6)  # 32 words: starts over all the time
    tok = load_tokenizer(cl100k_files["cl100k-today"])
    encoder = ExactEncoder(CompiledByteLevelEncoder(tok.backend.to_str(), "threads", reference=tok.backend))
    texts = shipped_texts()[::20]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    wrong: list[int] = []

    def work(k: int) -> None:
        got = encoder.encode_batch(texts[k::3] + texts[: k + 1], add_special_tokens=False)
        expected = want[k::3] + want[: k + 1]
        wrong.extend(i for i, (a, b) in enumerate(zip(got, expected)) if a.tolist() != b)

    on_threads(work, 4)
    assert not wrong


def test_a_wrong_rule_is_refused_by_the_probes(cl100k_files, monkeypatch, caplog):
    """Planted: tiktoken's spelling cut three numbers at a time and trailing whitespace apart
    (as the older spelling). The load checks must refuse the engine, and tiktoken encode."""
    wrong = split_rule_of(CL100K_PATTERN)
    monkeypatch.setattr(
        byte_level_encoder,
        "split_rule_of_sequence",
        lambda patterns: wrong if patterns == (CL100K_TODAY,) else split_rule_of_sequence(patterns),
    )
    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    monkeypatch.setattr(engine_choice, "_WARNED", set())
    tok = load_tokenizer(cl100k_files["cl100k-today"])
    with pytest.raises(ProbeMismatch, match="otherwise than the rule for its spelling"):
        CompiledByteLevelEncoder(tok.backend.to_str(), "wrong rule", reference=tok.backend)
    choice = tok.engine_choice
    # the byte table takes files without merges (another form), the compiled BPE failed its probes
    assert [(r.candidate, r.kind) for r in choice.refused] == [
        ("byte table", "form"),
        ("compiled byte-level BPE", "probes"),
    ]
    assert not tok.engine.startswith(ENGINE) and "exact fast path" in tok.engine


def test_other_splits_are_another_form_and_numba_a_package(cl100k_files, monkeypatch):
    spec = json.loads(Path(cl100k_files["cl100k"], "tokenizer.json").read_text(encoding="utf-8"))
    spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = CL100K_TODAY.replace(r"\s++$", r"\s+$")
    with pytest.raises(OtherForm, match=r"not one this engine cuts: its alternative .*a greedy run before \$"):
        CompiledByteLevelEncoder(json.dumps(spec), "a greedy trailing run")
    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    with modules_blocked("beamtok._src.engines.byte_level_native", "beamtok._src.engines.byte_level_split"):
        tok = load_tokenizer(cl100k_files["cl100k-today"])
        choice = tok.engine_choice
    compiled = choice.refused[1]  # after the byte table, which takes files without merges
    assert compiled.candidate == "compiled byte-level BPE" and compiled.missing_package
    assert "beamtok[compiled]" in compiled.reason
    assert not tok.engine.startswith(ENGINE) and "exact fast path" in tok.engine


@pytest.mark.parametrize("ignore_merges", [True, False])
def test_a_piece_that_is_a_token_is_that_token_where_merges_are_ignored(cl100k_files, tmp_path, ignore_merges):
    """The merge that makes `` hello`` dropped: with ``ignore_merges`` the piece is still that
    token whole (tokenizers' rule), without it the merges stop short. Such a file is one
    tiktoken cannot be exact for; this engine follows the file's merges."""
    spec = json.loads(Path(cl100k_files["cl100k"], "tokenizer.json").read_text(encoding="utf-8"))
    token = "Ġhello"
    spec["model"]["merges"] = [
        m for m in spec["model"]["merges"] if ("".join(m) if isinstance(m, list) else m.replace(" ", "", 1)) != token
    ]
    spec["model"]["ignore_merges"] = ignore_merges
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(Path(cl100k_files["cl100k"], "tokenizer_config.json").read_text())
    tok = load_tokenizer(str(tmp_path))
    assert tok.engine.startswith(ENGINE), tok.engine
    texts = ["say hello world", " hello", "hello hello hello"]
    want = [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]
    assert [ids.tolist() for ids in tok.encode_batch(texts, add_special_tokens=False)] == want
    assert (want[1] == [spec["model"]["vocab"][token]]) == ignore_merges


def test_a_lone_surrogate_is_refused_by_name(cl100k_files):
    """``tokenizers`` cannot take a lone surrogate either; the pipelines refuse such a record
    with its file and line before it reaches an engine (``base.validate.unencodable``)."""
    tok = load_tokenizer(cl100k_files["cl100k-today"])
    with pytest.raises(ValueError, match=r"lone surrogate '\\ud800' at character 1"):
        tok.encode_batch(["fine", "a\ud800b"])

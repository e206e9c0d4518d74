"""The byte table (beamtok._src.engines.byte_table): a byte-level BPE file without merges encodes
each UTF-8 byte as the file's token for it. It gives the ids of ``tokenizers`` on the shipped
corpus, code points of every width, added tokens inside text and hypothesis text; it takes the
forms that cannot change an id (NFC, a post-processor's BOS, Split steps that keep every
character) and refuses by name every file where it could be wrong."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok import load_tokenizer
from beamtok._src.engines import engine_choice
from beamtok._src.engines.byte_table import ByteTableEncoder
from beamtok._src.engines.engine_choice import BYTE_LEVEL, candidates_for
from beamtok._src.engines.exact_encoder import OtherForm
from beamtok._src.transforms.tokenize import Tokenizer
from beamtok.testing import tiny_tokenizer

from conftest import TOKENIZER_DIR, assert_same_ids, corpus_texts

TABLE = ByteTableEncoder.engine_name
CHARACTERS = st.characters(exclude_categories=("Cs",))  # a lone surrogate has no UTF-8 form: readers refuse it


def tiny_spec() -> dict:
    """``tiny_tokenizer``'s file as JSON, to be varied."""
    return json.loads(tiny_tokenizer().backend_tokenizer.to_str())


def tokenizer_of(spec: dict, name: str) -> Tokenizer:
    from tokenizers import Tokenizer as RustTokenizer

    return Tokenizer(RustTokenizer.from_str(json.dumps(spec)), name, None, None, None)


@pytest.fixture(scope="module")
def tiny() -> Tokenizer:
    return load_tokenizer(tiny_tokenizer())


def test_the_tiny_tokenizer_runs_on_the_table_first(tiny):
    assert candidates_for(BYTE_LEVEL, tiny.backend)[0].name == "byte table"
    assert tiny.engine_choice.engine == TABLE and tiny.engine_choice.refused == ()
    gpt2 = load_tokenizer(str(TOKENIZER_DIR))
    refusal = gpt2.engine_choice.refused[0]
    assert refusal.candidate == "byte table" and refusal.expected and "merges" in refusal.reason
    assert "byte table" not in gpt2.engine  # a file with merges is another form: not listed against it


def test_the_shipped_corpus_and_every_byte_width(tiny):
    texts = corpus_texts()[::4]  # a quarter of each shipped file: which bytes a text holds is all that matters
    widths = ["".join(chr(c) for c in range(start, start + 400)) for start in (0, 0x370, 0x4E00, 0x1F600)]
    # every lead byte of a UTF-8 sequence (2, 3 and 4 bytes long; no surrogate)
    leads = [*range(0x80, 0x800, 0x40), *(cp for cp in range(0x800, 0x10000, 0x1000) if not 0xD800 <= cp < 0xE000)]
    widths.append("".join(chr(cp) for cp in [*leads, 0xD7FF, 0x10000, 0x40000, 0x80000, 0xC0000, 0x100000]))
    texts += [*widths, "", " ", "\x00", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", "é\u0301 e\u0301"]
    assert_same_ids(tiny, texts, "tiny tokenizer")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(CHARACTERS, max_size=40) | st.sampled_from(["<|endoftext|>", "\r\n", "  ", "🤗"]), max_size=6))
def test_hypothesis_text(tiny, parts):
    assert_same_ids(tiny, ["".join(parts)], "hypothesis text")


def test_nfc_a_bos_and_a_keeping_split_are_taken():
    spec = tiny_spec()
    spec["normalizer"] = {"type": "NFC"}
    spec["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }
    bos = spec["added_tokens"][0]
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos["content"], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos["content"]: {"id": bos["content"], "ids": [bos["id"]], "tokens": [bos["content"]]}},
    }
    tok = tokenizer_of(spec, "nfc-bos-split")
    assert tok.engine_choice.engine == TABLE, tok.engine
    assert tok.exact_encoder().engine.normal_form is not None and tok.exact_encoder().engine.prefix == [bos["id"]]
    assert_same_ids(tok, [*corpus_texts()[:10], "e\u0301 A\u030a\u212b ﬁ"], "NFC, BOS, Split")


def refused_form(change) -> str:
    spec = tiny_spec()
    change(spec)
    tok = tokenizer_of(spec, "varied")
    refusal = tok.engine_choice.refused[0]
    assert refusal.candidate == "byte table"
    assert tok.engine_choice.engine != TABLE
    if tok.engine_choice.encoder is not None:  # the next engine is exact
        assert_same_ids(tok, [*corpus_texts()[:5], "x<|endoftext|>y"], "the next engine")
    return refusal.reason


def test_files_it_could_be_wrong_for_are_refused_by_name():
    def prefix_space(spec):
        spec["pre_tokenizer"]["add_prefix_space"] = True

    def removed(spec):
        level = spec["pre_tokenizer"]
        split = {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": False}
        spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, level]}

    def lowercase(spec):
        spec["normalizer"] = {"type": "Lowercase"}

    def missing_byte(spec):
        vocab = spec["model"]["vocab"]
        vocab.pop("A")
        spec["model"]["unk_token"] = None

    def whole_words(spec):
        spec["model"]["ignore_merges"] = True
        spec["model"]["vocab"]["Ġthe"] = len(spec["model"]["vocab"]) + 10

    def subword_prefix(spec):
        spec["model"]["continuing_subword_prefix"] = "##"

    assert "prefix space" in refused_form(prefix_space)
    assert "may drop characters" in refused_form(removed)
    assert "Lowercase" in refused_form(lowercase)
    assert "lacks the byte-level token of byte 0x41" in refused_form(missing_byte)
    assert "several bytes" in refused_form(whole_words)
    assert "subword prefix" in refused_form(subword_prefix)


def test_a_table_that_gives_other_ids_is_refused_at_its_probes(monkeypatch, caplog):
    """The planted bug: one byte's id off by one. The probes must refuse the table, a warning
    must say so, and the file still encodes exactly on the next engine."""
    from beamtok._src.engines import byte_table

    right = byte_table._byte_ids

    def off_for_e(model, refuse):
        table = right(model, refuse)
        table[ord("e")] += 1
        return table

    monkeypatch.setattr(byte_table, "_byte_ids", off_for_e)
    monkeypatch.setattr(engine_choice, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="beamtok._src.engines.engine_choice"):
        tok = tokenizer_of(tiny_spec(), "planted")
        choice = tok.engine_choice
    assert choice.refused[0].candidate == "byte table" and choice.refused[0].probes_differed
    assert choice.engine != TABLE and any("byte table" in r.getMessage() for r in caplog.records)
    assert_same_ids(tok, corpus_texts()[:5], "after the refusal")


def test_a_file_with_merges_is_another_form():
    with pytest.raises(OtherForm, match="has merges"):
        ByteTableEncoder(load_tokenizer(str(TOKENIZER_DIR)).backend.to_str(), "gpt2")


def test_a_lone_surrogate_is_named():
    tok = load_tokenizer(tiny_tokenizer())
    with pytest.raises(ValueError, match="lone surrogate"):
        tok.encode_batch(["ok \ud800 no"])

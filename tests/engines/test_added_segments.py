"""Texts holding added tokens on the fast path (``beamtok._src.engines.added_segments``): cut
at their added tokens, the parts encoded by the engine, or split out by kitoken itself where
it gives the same cuts; the ids are those of ``tokenizers`` for files shaped like Gemma 2's
(``"\\n"`` and its runs are added tokens), T5's sentinels on cached words and BERT's
``[CLS]`` written in a text. The tokenizers are trained here on the shipped corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamtok import load_tokenizer
from beamtok._src.engines.added_segments import AddedSegments

from byte_level_files import shipped_texts
from conftest import ROOT, assert_same_ids, trained_family
from test_fast_path_cached_words import CachedWords

pytest.importorskip("kitoken")

NEWLINES = ["\n", "\n\n", "\n\n\n", "\n\n\n\n"]  # Gemma 2's added tokens hold these (and longer runs)
TURNS = ["<start_of_turn>", "<end_of_turn>", "<start>"]  # "<start>" begins "<start_of_turn>": the longer wins
CHAT = [
    "<start_of_turn>user\nWhat is a sonnet?<end_of_turn>\n<start_of_turn>model\nFourteen lines.\n\n\n\nIn iambic pentameter.<end_of_turn>\n",
    "\n\n\n\n\n\n\n<start><start_of_turn><end_of_turn>\n",
    "no added token here",
    "",
]


def with_added(base: Path, directory: Path, tokens: list[str], **parts) -> str:
    """The trained file with ``tokens`` added (not normalized, as Gemma's and T5's are) and ``parts`` replaced."""
    spec = json.loads((base / "tokenizer.json").read_text(encoding="utf-8"))
    start = max(max(t["id"] for t in spec["added_tokens"]), len(spec["model"]["vocab"])) + 1
    extra = [
        {
            "id": start + i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in enumerate(tokens)
    ]
    spec.update({"added_tokens": spec["added_tokens"] + extra, **parts})
    directory.mkdir()
    (directory / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    (directory / "tokenizer_config.json").write_text((base / "tokenizer_config.json").read_text(encoding="utf-8"))
    return str(directory)


@pytest.mark.parametrize("engine", ["kitoken", "compiled"])
def test_gemma_2s_added_tokens_are_cut_out_and_the_parts_encoded_by_the_engine(tmp_path, engine):
    """Newlines and turns as added tokens: the file takes kitoken first (nearly every text
    holds a newline), which splits them out itself (longest first); compiled, the text is cut
    at them here and the parts merged by the compiled BPE. Either way a text with a newline
    is not sent to ``tokenizers``."""
    path = with_added(trained_family("sp-bpe-metaspace"), tmp_path / "gemma2-like", [*NEWLINES, *TURNS])
    if engine == "kitoken":
        tok = load_tokenizer(path)
        assert tok.engine.startswith("kitoken (exact fast path"), tok.engine
        assert tok.exact_encoder().engine.specials, tok.exact_encoder().engine.specials_refusal
        assert not tok.exact_encoder().engine.routing.routed.found_in(CHAT[0])
    else:
        tok = CachedWords(path, "SentencePiece-style BPE")
        assert tok.engine.engine.routing.segments is not None, tok.engine.engine.routing.segments_refusal
    assert_same_ids(
        tok,
        [
            *shipped_texts()[::3],
            *CHAT,
            *AddedSegments(json.loads(Path(path, "tokenizer.json").read_text())["added_tokens"]).probe_texts(),
        ],
        "Gemma 2's form",
    )


def test_a_unigram_encodes_the_parts_between_t5s_sentinels(tmp_path):
    path = with_added(trained_family("unigram"), tmp_path / "sentinels", ["<extra_id_0>", "<extra_id_1>", *NEWLINES])
    tok = load_tokenizer(path)
    engine = tok.exact_encoder().engine
    assert tok.engine.startswith("beamtok compiled Unigram on cut words (exact fast path"), tok.engine
    assert engine.routing.segments is not None, engine.routing.segments_refusal
    texts = ["The <extra_id_0> walks in <extra_id_1> park.", "<extra_id_0><extra_id_1>", *CHAT, *shipped_texts()[::6]]
    assert_same_ids(tok, texts, "T5's sentinels")


def test_berts_cls_in_a_text_is_cut_in_python_where_kitoken_would_lower_case_it_first():
    """kitoken normalizes before it looks for its specials (``[CLS]`` becomes ``[cls]``):
    the load probe finds it and the parts are cut here instead."""
    tok = load_tokenizer(str(ROOT / "data" / "tokenizers" / "bert-base-uncased"))
    engine = tok.exact_encoder().engine
    assert not engine.specials and "'[CLS]' encodes as" in engine.specials_refusal, engine.specials_refusal
    assert engine.routing.segments is not None
    texts = [
        "[CLS] Hello [SEP] world [MASK].",
        "[UNK][UNK] twice",
        "x[PAD]y",
        "[cls] is not [CLS]",
        "Ünïcödé [SEP] ΟΔΥΣΣΕΥΣ",
    ]
    assert_same_ids(tok, texts, "BERT's tokens in text")


def test_a_metaspace_that_marks_the_first_part_only_keeps_such_texts_whole(tmp_path):
    first = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}
    path = with_added(trained_family("unigram"), tmp_path / "first", ["<extra_id_0>"], pre_tokenizer=first)
    tok = load_tokenizer(path)
    engine = tok.exact_encoder().engine
    assert engine.routing.segments is None and "first part" in engine.routing.segments_refusal, (
        engine.routing.segments_refusal
    )
    assert_same_ids(tok, ["a <extra_id_0> b", "<extra_id_0>x", "x<extra_id_0>"], "prepend first")


PIECES = [
    *NEWLINES,
    *TURNS,
    "<extra_id_0>",
    "[CLS]",
    "[SEP]",
    "<unk>",
    "<s>",
    "</s>",
    " ",
    "  ",
    "\t",
    "a",
    "Hello",
    " world",
    "é",
    "ΟΔΥΣΣΕΥΣ",
    "\u2581",
    "x",
]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> list:
    """A Gemma-2-like file on kitoken, T5-like sentinels on cached words, and BERT."""
    root = tmp_path_factory.mktemp("mixed")
    return [
        load_tokenizer(with_added(trained_family("sp-bpe-metaspace"), root / "gemma2-like", [*NEWLINES, *TURNS])),
        load_tokenizer(with_added(trained_family("unigram"), root / "sentinels", ["<extra_id_0>", *NEWLINES])),
        load_tokenizer(str(ROOT / "data" / "tokenizers" / "bert-base-uncased")),
    ]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(parts=st.lists(st.sampled_from(PIECES), max_size=12))
def test_any_mix_of_added_tokens_and_text_gives_the_ids_of_tokenizers(mixed, parts):
    text = "".join(parts)
    for tok in mixed:
        for special in (True, False):
            fast = tok.encode_batch([text], add_special_tokens=special, engine="exact")[0].tolist()
            assert fast == tok.encode_batch([text], add_special_tokens=special, engine="tokenizers")[0].tolist(), (
                tok.engine[:40],
                text,
            )

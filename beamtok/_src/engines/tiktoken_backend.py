"""An exact tiktoken encoder for byte-level BPE tokenizers (GPT-2, cl100k, o200k, Llama-3,
Qwen2 and their kind).

tiktoken encodes several times faster than the Rust ``tokenizers`` library; for GPT-2's split
pattern kitoken (``kitoken_engine``), and for cl100k and o200k themselves bpe-openai, encode
faster still, behind the same checks and probes. It is exact for a
Hugging Face tokenizer only when that tokenizer is plain byte-level BPE: no normalizer but
NFC (applied here before encoding, as ``tokenizers`` makes it: ``normal_forms``), a split pattern (the ByteLevel pre-tokenizer's own GPT-2
split, or a ``Split`` regex followed by ByteLevel without its own split), no prefix space, a
BPE model whose merges tiktoken's rank order reproduces (below), no byte fallback, added
tokens without strip options, and a post-processor that adds fixed tokens around a single
text or none (TemplateProcessing as Llama-3 ships it, BERT's and RoBERTa's processors: the
ids it adds are put around the engine's, as ``tokenizers`` does with ``add_special_tokens``).
Anything else is refused, never approximated. What passes these checks must then encode a set of hard strings
(whitespace runs, digits, CJK, emoji sequences, combining marks, control characters, added
tokens inside text, very long words) exactly as ``tokenizers`` does, with and without the
special tokens, or it is refused. A native engine whose own split pattern is spelled otherwise
than the file's must first give the file's ids on ``split_patterns.split_sample()``.

When the two merge orders agree. Both engines start from the bytes of a piece and merge one
adjacent pair at a time. tiktoken merges the pair whose concatenation is the token of lowest
id (a pair is a candidate whenever its concatenation is a token), the leftmost on a tie, and
returns a piece that is itself a token whole. ``tokenizers`` merges the listed pair (a
candidate only if listed) that comes first in the merges list. So they agree when:

1. every merge makes a token (``left + right`` is in the vocabulary) and the merges come in
   the order of the ids they make (never decreasing): then "first in the list" picks a pair
   making the lowest id, as tiktoken does;
2. a pair is listed whenever its concatenation is a token, so both have the same candidates.
   Files with one merge per token in id order (GPT-2's, the ones ``ranks.py`` writes) list the
   merge of each token's own history; files with several merges per token (written by
   transformers' ``TikTokenConverter``: Llama-3, GPT-4-class) list every split of a token into
   two tokens, which is checked here;
3. a piece that is a token comes out whole: ``ignore_merges`` on (``TikTokenConverter`` sets
   it); required where several merges make one token.

What remains is a tie: two candidate pairs making the same token at once. Disjoint ones are
merged in either order with the same result; overlapping ones (``a + b == b + c`` around a
shared middle token) go leftmost in tiktoken and by list order in ``tokenizers``, which can
put the right one first. Whether such a state is ever reached depends on the ranks, so it is
what the probe strings (runs of one character, repeated pairs) and the tests (every shipped
document, hypothesis text, tokenizer.json files written by ``TikTokenConverter`` for cl100k,
o200k and Qwen ranks) exercise; a file that ever encodes differently on them is refused.
"""

from __future__ import annotations

import binascii
import gzip
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.engines.exact_encoder import ExactEncoder, MissingExtra, Needles, ProbeMismatch, added_around
from beamtok._src.engines.id_arrays import int32_ids
from beamtok._src.engines.kitoken_engine import kitoken_engine
from beamtok._src.engines.normal_forms import ExactNormalForm
from beamtok._src.engines.ranks import missing_byte_token
from beamtok._src.engines.split_patterns import as_oniguruma_reads_it, split_sample
from beamtok._src.engines.tokenizer_parts import read_spec
from beamtok._src.engines.whole_numbers import WholeNumbers, keeps_numbers_whole

__all__ = ["GPT2_PATTERN", "PROBES", "TiktokenEncoder", "native_encoder", "split_pattern", "takes_nfc"]

# GPT-2's pre-tokenization split, as the ByteLevel pre-tokenizer applies it.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


SAMPLE_CHUNK = 4096  # split-sample strings compared per batch

# Strings where byte-level BPE engines tend to part ways; each must encode identically.
PROBES = (
    "",
    " ",
    "  ",
    "\t\t x",
    "a  b   c    d",
    "trailing   ",
    "\n\n\n",
    "\r\n\r\nx",
    " \n \n  \n",
    "line\n  indented\n\tTab",
    "1234567890 12 123 1234",
    "3.14159e-10, -42, +7, 1,000,000",
    "x²³ ½ ⅓ ٣٤٥ ໒໓",
    "中文字符和日本語のテキスト、한국어 텍스트。",
    "Ελληνικά Русский עברית العربية हिन्दी",
    "emoji 😀👍🏽 👩‍👩‍👧‍👦 🏳️‍🌈 ❤️",
    "e\u0301 a\u0308 n\u0303 ü é",
    "a\u1dc4\u0899 \u0301\u1ac1\u0334 \u0301\U00010f46\u0334",
    "\u200b\u200d\ufeff zero width",
    "ctrl \x00\x01\x1f\x7f end",
    "don't I'LL we'Ve they'RE it's",
    "CamelCaseWordsAndALLCAPS snake_case kebab-case",
    "https://example.com/a?b=c&d=e#f",
    "<|endoftext|>inside<|endoftext|> text",
    "a" * 300,
    "ab" * 200 + "!",
    "  " * 40 + "x",
    "\u00a0\u2003\u3000 odd spaces",
    "def f(x):\n    return x ** 2  # comment\n",
    "para\n\nnext\n's x\t'd y \n'll\r\n\r\n're\u3000z\u2028w \u2008語 \u2008a\x85b",
    '{"json": [1, 2, {"k": null}]}',
    # runs of one character and repeated pairs: where two overlapping pairs can make one token
    " " * 77,
    "=" * 61,
    "*" * 33,
    "/" * 29,
    "-" * 71,
    "\t" * 17,
    "\n" * 23,
    "0" * 41,
    "atatatatatat",
    "erererererer",
    "enccnce",
)


def _byte_level_table() -> dict[int, str]:
    """A ``str.translate`` table taking a byte-level token's characters to the characters
    whose Latin-1 code is the byte each stands for; any other character is sent to U+FFFF,
    which Latin-1 cannot encode (so a token that is not byte-level raises)."""
    table: dict[int, str] = {c: "\uffff" for c in range(0x144)}
    table.update({ord(ch): chr(b) for ch, b in _byte_decoder().items()})
    return table


def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's byte-to-printable-character table."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


class TiktokenEncoder(ExactEncoder):
    """Encodes exactly like the given HF tokenizer (``encode_batch_fast``), through tiktoken."""

    def __init__(
        self, tokenizer_json: str, name: str, reference: Any = None, spec: dict[str, Any] | None = None
    ) -> None:
        """``reference``: the ``tokenizers.Tokenizer`` of ``tokenizer_json``, when the caller
        holds one (else it is built here), to encode the probe strings with; ``spec``: the text
        parsed, where the caller has parsed it (only read)."""
        try:
            import tiktoken
        except ImportError as e:
            raise MissingExtra(
                "the exact fast path needs the tiktoken package: pip install tiktoken", install="tiktoken"
            ) from e
        spec = read_spec(tokenizer_json) if spec is None else spec
        pattern, nfc = self._check(spec, name)
        self.normal_form = ExactNormalForm("NFC") if nfc else None
        try:
            pattern = as_oniguruma_reads_it(pattern)  # tiktoken's regex engine reads two spellings otherwise
        except ValueError as e:
            raise ConfigError(
                f"tokenizer {name!r} cannot use the exact fast path: its split pattern has {e}, which beamtok does not translate"
            ) from None
        self.prefix, self.suffix = added_around(spec, name)
        to_bytes = _byte_level_table()
        # added tokens are split out of the text before BPE, by both libraries
        special = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
        ranks: dict[bytes, int] = {}
        for token, rank in spec["model"]["vocab"].items():
            if token in special:
                continue
            try:
                ranks[token.translate(to_bytes).encode("latin-1")] = rank
            except UnicodeEncodeError as e:
                raise ConfigError(
                    f"tokenizer {name!r}: vocab entry {token!r} is not byte-level; tiktoken cannot reproduce it"
                ) from e
        try:
            self.encoding = tiktoken.Encoding(
                name=f"beamtok:{name}", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special
            )
        except ValueError as e:
            raise ConfigError(f"tokenizer {name!r} cannot use the exact fast path: tiktoken refuses it ({e})") from e
        if reference is None:
            from tokenizers import Tokenizer as RustTokenizer

            reference = RustTokenizer.from_str(tokenizer_json)
        self.native, self.engine_name, routed, own_spelling = _native_engine(tokenizer_json, pattern, ranks)
        # texts holding one of these go to tiktoken: the native engines know no added tokens,
        # and kitoken leaves a few whitespace characters to tiktoken (see kitoken_engine)
        self._routed = Needles([*special, *routed])
        self.native_refusal = ""
        if self.native is not None and not own_spelling:
            if self.engine_name == "bpe-openai" and keeps_numbers_whole(reference):
                # tiktoken's cl100k spelling as tokenizers reads it: long numbers whole (whole_numbers)
                ordinary = self.encoding.encode_ordinary
                self.native = WholeNumbers(self.native.encode, ordinary)
                self.engine_name = "bpe-openai (numbers of 4 or more digits by tiktoken)"
            self.native_refusal = self._differs_on_sample(reference)
            if self.native_refusal:
                self.native, self.engine_name, self._routed = None, "tiktoken", Needles(list(special))
        self._probe(name, reference)

    def _differs_on_sample(self, reference: Any) -> str:
        """Where the native engine, chosen for a pattern spelled otherwise than its own, gives
        other ids than ``tokenizers`` on the split sample ("" where it never does)."""
        texts = [text for text in split_sample() if not self._routed.found_in(text)]
        for start in range(0, len(texts), SAMPLE_CHUNK):  # in chunks: an engine that differs stops early
            chunk = texts[start : start + SAMPLE_CHUNK]
            want = reference.encode_batch_fast(chunk, add_special_tokens=False)
            got = self.encode_batch(chunk, add_special_tokens=False)
            for text, a, b in zip(chunk, want, got):
                if a.ids != b.tolist():
                    return f"{self.engine_name} splits {text!r} otherwise than the file's pattern"
        return ""

    def _probe(self, name: str, reference: Any) -> None:
        """Refuse unless the hard strings encode exactly as Hugging Face ``tokenizers`` does,
        with the post-processor's tokens and without."""
        for special in (True, False):
            # one text at a time, as the engines compared with it encode
            want = [reference.encode(text, add_special_tokens=special).ids for text in PROBES]
            got = [ids.tolist() for ids in self.encode_batch(PROBES, add_special_tokens=special)]
            for text, a, b in zip(PROBES, want, got):
                if a != b:
                    raise ProbeMismatch(
                        f"tokenizer {name!r} cannot use the exact fast path: {text[:40]!r} encodes as {b[:8]}... "
                        f"instead of {a[:8]}... (tokenizers, add_special_tokens={special})"
                    )

    @staticmethod
    def _check(spec: dict[str, Any], name: str) -> tuple[str, bool]:
        """The split pattern and whether NFC comes first, or ConfigError naming what is not exact."""

        def refuse(why: str) -> ConfigError:
            return ConfigError(f"tokenizer {name!r} cannot use the exact fast path (tiktoken): {why}")

        nfc = takes_nfc(spec, refuse)
        pattern = split_pattern(spec.get("pre_tokenizer") or {}, refuse)
        model = spec["model"]
        if model.get("type") != "BPE" or model.get("dropout") or model.get("unk_token") or model.get("byte_fallback"):
            raise refuse("its model is not plain byte-level BPE (dropout, unk token or byte fallback)")
        if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
            raise refuse("its BPE model uses subword affixes")
        missing = missing_byte_token(model.get("vocab") or {})
        if missing:  # tiktoken would panic on such a byte
            raise refuse(missing)
        for added in spec.get("added_tokens", []):
            if added.get("lstrip") or added.get("rstrip") or added.get("single_word") or added.get("normalized"):
                raise refuse(f"added token {added['content']!r} has matching options tiktoken does not have")
        _check_merges(model, refuse)
        return pattern, nfc

    def _encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        # one thread, like one Rust tokenizer per core: parallelism comes from worker processes
        normal_form = self.normal_form
        batch = list(texts) if normal_form is None else [normal_form(t) for t in texts]
        native = self.native
        encode = self.encoding.encode
        if native is None:  # text by text: encode_batch hands each text to a thread pool, ~6% slower here
            return [int32_ids(encode(text, allowed_special="all", disallowed_special=())) for text in batch]
        routed = self._routed
        out = []
        for text in batch:
            if routed.found_in(text):
                ids = encode(text, allowed_special="all", disallowed_special=())
            else:
                try:
                    ids = native.encode(text)
                except UnicodeEncodeError:  # a lone surrogate: tiktoken's own handling, as without a native engine
                    ids = encode(text, allowed_special="all", disallowed_special=())
            out.append(int32_ids(ids))
        return out


def _native_engine(tokenizer_json: str, pattern: str, ranks: dict[bytes, int]) -> tuple[Any, str, frozenset[str], bool]:
    """The engine that encodes texts tiktoken need not: kitoken for GPT-2's split pattern,
    bpe-openai for its own encodings, when installed and checked; else tiktoken itself
    (None). Its name, the characters it leaves to tiktoken, and whether the file spells the
    engine's split pattern as the engine's own (else the caller compares ids on the split
    sample: see ``split_patterns``)."""
    from beamtok._src.engines.ranks import CL100K_PATTERN, O200K_PATTERN, QWEN2_PATTERN

    if pattern == GPT2_PATTERN:
        engine = kitoken_engine(tokenizer_json, ranks)
        if engine is not None:
            return engine, "kitoken", engine.routed, True
    bindings = native_encoder(pattern, ranks)
    if bindings is not None:
        return bindings, "bpe-openai", frozenset(), True
    if pattern in (GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN, QWEN2_PATTERN):
        return None, "tiktoken", frozenset(), True  # spelled as a known split no engine here takes with these ranks
    sized = _bpe_openai_pattern_of_size(ranks)
    bindings = native_encoder(sized, ranks) if sized is not None else None
    if bindings is not None:
        return bindings, "bpe-openai", frozenset(), False
    engine = kitoken_engine(tokenizer_json, ranks)
    if engine is not None:
        return engine, "kitoken", engine.routed, False
    return None, "tiktoken", frozenset(), True


def _bpe_openai_pattern_of_size(ranks: dict[bytes, int]) -> str | None:
    """The pattern of the bpe-openai encoding whose size these ranks have (the ranks
    themselves are compared by :func:`native_encoder`)."""
    from beamtok._src.engines.ranks import CL100K_PATTERN, O200K_PATTERN

    return {100_256: CL100K_PATTERN, 199_998: O200K_PATTERN}.get(len(ranks))


def _check_merges(model: dict[str, Any], refuse: Any) -> None:
    """Refuse a merges list tiktoken's rank order cannot reproduce (see the module docstring)."""
    vocab = model["vocab"]
    pairs = [
        (merge[0], merge[1]) if isinstance(merge, list) else tuple(merge.split(" ", 1)) for merge in model["merges"]
    ]
    made = [vocab.get(left + right) for left, right in pairs]
    unknown = made.index(None) if None in made else len(made)
    ranks = np.array(made[:unknown], dtype=np.int64)
    steps = np.diff(ranks)
    falls = np.flatnonzero(steps < 0)
    if len(falls):
        number = int(falls[0]) + 1
        raise refuse(
            f"its merges are not in the order of the tokens they make (merge {number} makes id {made[number]} after id {made[number - 1]}); "
            "tiktoken ranks merges by the id of the token they make"
        )
    if unknown < len(made):
        left, right = pairs[unknown]
        raise refuse(f"merge {unknown} ({left!r} + {right!r}) makes a token that is not in its vocabulary")
    if not (steps == 0).any():
        return  # one merge per token, in id order: the form beamtok._src.engines.ranks writes
    if not model.get("ignore_merges"):
        raise refuse(
            "its merges list several merges per token but ignore_merges is off: a word that is itself a token could be "
            "split, which tiktoken never does"
        )
    # tiktoken merges any two tokens that make a token: every such split must be listed. A token
    # with as many listed (distinct) splits as it has cuts has them all; only the others are cut.
    listed = set(pairs)
    distinct = (
        ranks
        if len(listed) == len(pairs)
        else np.array([vocab[left + right] for left, right in listed], dtype=np.int64)
    )
    splits_listed = np.bincount(distinct, minlength=max(vocab.values(), default=0) + 1)
    tokens = list(vocab)
    cuts = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens)) - 1
    listed_of = splits_listed[np.fromiter(vocab.values(), dtype=np.int64, count=len(tokens))]
    for i in np.flatnonzero(listed_of < cuts).tolist():  # in the vocabulary's order, as the first refusal names
        token = tokens[i]
        for cut in range(1, len(token)):
            left = token[:cut]
            if left in vocab:
                right = token[cut:]
                if right in vocab and (left, right) not in listed:
                    raise refuse(
                        f"its merges list several merges per token but not {left!r} + {right!r} (which makes {token!r}); "
                        "tiktoken would merge them"
                    )


def native_encoder(pattern: str, ranks: dict[bytes, int]) -> Any:
    """bpe-openai's native encoder (an optional, alpha engine) when it is installed and this
    tokenizer is one of its built-in encodings: the same split pattern and the very same
    ranks. Else None, and tiktoken encodes. The probe strings check it like tiktoken."""
    from beamtok._src.engines.ranks import CL100K_PATTERN, O200K_PATTERN

    encoding = {CL100K_PATTERN: "cl100k_base", O200K_PATTERN: "o200k_base"}.get(pattern)
    if encoding is None:
        return None
    located = _bpe_openai_bindings()
    if located is None:
        return None
    package, _bindings = located
    data = package / "data" / f"{encoding}.tiktoken.gz"
    try:
        lines = gzip.decompress(data.read_bytes()).splitlines()
        theirs = {binascii.a2b_base64(token): int(rank) for token, rank in (line.split() for line in lines if line)}
    except (OSError, ValueError):
        return None
    if theirs != ranks:
        return None
    return _bindings.tokenizer_for_encoding(encoding)


def _bpe_openai_bindings() -> tuple[Path, Any] | None:
    """bpe-openai's directory and its compiled module, loaded without running the package's
    ``__init__``: that decodes the ranks of every encoding it knows (~2 s of start-up in every
    process and Beam worker); the compiled module alone needs none of it."""
    import importlib.util
    import sys

    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    loaded = sys.modules.get("bpe_openai._bindings")
    if loaded is not None:
        return package, loaded
    for path in sorted(package.glob("_bindings*.so")) + sorted(package.glob("_bindings*.pyd")):
        try:
            found = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
            if found is None or found.loader is None:
                continue
            module = importlib.util.module_from_spec(found)
            found.loader.exec_module(module)
        except ImportError:
            continue
        if hasattr(module, "tokenizer_for_encoding"):
            return package, module
    try:  # an install laid out otherwise: the package's own import
        with warnings.catch_warnings():  # its import calls a deprecated importlib.resources API
            warnings.simplefilter("ignore", DeprecationWarning)
            from bpe_openai import _bindings
    except ImportError:
        return None
    return package, _bindings


def takes_nfc(spec: dict[str, Any], refuse: Any) -> bool:
    """Whether a byte-level file normalizes to NFC (True) or not at all (False); ``refuse(why)``
    raised for any other normalizer, which cannot be applied exactly."""
    normalizer = spec.get("normalizer")
    while (
        normalizer is not None
        and normalizer.get("type") == "Sequence"
        and len(normalizer.get("normalizers") or []) <= 1
    ):
        normalizer = (normalizer.get("normalizers") or [None])[
            0
        ]  # DeepSeek-V3's file holds an empty Sequence: no normalizer
    if normalizer is not None and normalizer.get("type") != "NFC":
        raise refuse(f"its normalizer is {normalizer.get('type')} (only NFC can be applied exactly)")
    return normalizer is not None


def split_pattern(pre: dict[str, Any], refuse: Any) -> str:
    """The regex a byte-level pre-tokenizer splits with: GPT-2's for ByteLevel with its own
    split, or a Split step's followed by a ByteLevel that does not split again."""
    if pre.get("type") == "ByteLevel":
        if not pre.get("use_regex", True) or pre.get("add_prefix_space"):
            raise refuse("its ByteLevel pre-tokenizer adds a prefix space or does not split")
        return GPT2_PATTERN
    if pre.get("type") == "Sequence":
        steps = pre.get("pretokenizers", [])
        if len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel":
            split, level = steps
            regex = (split.get("pattern") or {}).get("Regex")
            if regex is None or split.get("behavior") != "Isolated" or split.get("invert"):
                raise refuse("its Split step is not an isolating regex split")
            if level.get("use_regex") or level.get("add_prefix_space"):
                raise refuse("its ByteLevel step splits again or adds a prefix space")
            return str(regex)
    raise refuse(f"its pre-tokenizer is {pre.get('type')}, not a regex split followed by ByteLevel")

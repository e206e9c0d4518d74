"""Test helpers shipped with beamtok, for our tests and for users' own stages.

``check_resumption(make_dataset)`` proves a pipeline resumes exactly: for each chosen step k
it iterates k items, saves the state, passes it through ``json.dumps``/``json.loads`` into a
freshly built dataset, and checks the remainder equals the uninterrupted run from k on, and
that the resumed run ends with the same ``stats()`` as the uninterrupted one.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FAMILIES",
    "ResumptionReport",
    "assert_items_equal",
    "check_equivalent",
    "check_resumption",
    "family_tokenizer",
    "items_equal",
    "tiny_tokenizer",
]


@dataclass
class ResumptionReport:
    """What check_resumption checked.

    Attributes:
        total_items: Items of the uninterrupted run.
        steps_checked: The steps resumed at.
        max_state_bytes: The largest state, as JSON.
    """

    total_items: int
    steps_checked: list[int]
    max_state_bytes: int


def items_equal(a: Any, b: Any) -> bool:
    """Deep equality for examples and batches: dicts, tuples, lists, numpy arrays, tensors.

    Args:
        a: An item.
        b: Another.
    Returns:
        Whether they are equal, arrays and tensors compared by value.
    """
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(items_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(items_equal(x, y) for x, y in zip(a, b))
    if hasattr(a, "numpy") and hasattr(b, "numpy") and not isinstance(a, np.ndarray):
        a, b = a.numpy(), b.numpy()
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    return bool(a == b) and type(a) is type(b)


def assert_items_equal(got: list[Any], want: list[Any], context: str = "") -> None:
    """Assert two item lists are equal, naming the first position that differs.

    Args:
        got: Items read.
        want: Items expected.
        context: Words put before the message.
    Raises:
        AssertionError: The lists differ (the first position that does is named).
    """
    for i, (g, w) in enumerate(zip(got, want)):
        if not items_equal(g, w):
            raise AssertionError(f"{context}item {i} differs:\n got {_brief(g)}\nwant {_brief(w)}")
    if len(got) != len(want):
        raise AssertionError(f"{context}got {len(got)} items, want {len(want)}")


def check_resumption(
    make_dataset: Callable[[], Any],
    *,
    steps: Iterable[int] | None = None,
    random_steps: int = 0,
    seed: int = 0,
    limit: int | None = None,
    resume_dataset: Callable[[], Any] | None = None,
) -> ResumptionReport:
    """Check that resuming at each step yields exactly the uninterrupted remainder.

    ``steps`` defaults to every step of the run (use ``random_steps`` on long runs to check a
    seeded random sample plus the first and last step). ``resume_dataset`` builds the dataset
    the state is restored into (default: ``make_dataset``), for checks across modes. ``limit``
    caps how many items the reference run takes.

    The states are taken in one run, as a trainer takes them, which must itself be the
    uninterrupted run (taking a state changes nothing that follows); each is then restored
    into a new pipeline, whose remainder and final ``stats()`` must be the reference's.

    Args:
        make_dataset: Builds the dataset (called once a run).
        steps: The steps to resume at (None: every step).
        random_steps: Resume at this many seeded random steps besides the first and last.
        seed: The seed of those steps.
        limit: Items the reference run takes at most.
        resume_dataset: Builds the dataset states are restored into (None: ``make_dataset``).
    Returns:
        A ResumptionReport: items, steps checked, the largest state.
    Raises:
        AssertionError: A resume differs from the uninterrupted run.
    """
    reference = make_dataset().iter()
    full = list(itertools.islice(reference, limit))
    final_stats = _stats_of(reference)
    n = len(full)
    if steps is None:
        if random_steps:
            rng = random.Random(seed)
            steps = sorted({0, n, *(rng.randint(0, n) for _ in range(random_steps))})
        else:
            steps = range(n + 1)
    states: list[tuple[int, str]] = []
    run = make_dataset().iter()
    taken = 0
    for k in sorted(steps):
        chunk = list(itertools.islice(run, k - taken))
        assert_items_equal(
            chunk,
            full[taken:k],
            f"step {k}, the run taking states (from item {taken}, states taken at {[s for s, _ in states]}): ",
        )
        taken = k
        states.append((k, json.dumps(run.state_dict())))
    checked: list[int] = []
    max_bytes = 0
    for k, blob in states:
        max_bytes = max(max_bytes, len(blob))
        restored_state = json.loads(blob)
        pristine = copy.deepcopy(restored_state)
        resumed = (resume_dataset or make_dataset)().iter(restored_state)
        if restored_state != pristine:
            raise AssertionError(f"step {k}: iter(...) mutated the state it was given")
        rest = list(itertools.islice(resumed, None if limit is None else n - k))
        assert_items_equal(rest, full[k:], f"step {k}, after resuming: ")
        resumed_stats = _stats_of(resumed)
        if resumed_stats != final_stats:
            raise AssertionError(
                f"step {k}: stats() at the end differ after resuming:\n got {resumed_stats}\nwant {final_stats}"
            )
        checked.append(k)
    return ResumptionReport(n, checked, max_bytes)


def check_equivalent(
    make_a: Callable[[], Any], make_b: Callable[[], Any], *, random_steps: int = 8, seed: int = 0
) -> None:
    """Check two pipelines are one stream (e.g. on the fly and from a cache): the same spec
    fingerprint, the same items, the same ``stats()`` at the end, and states taken at seeded
    random steps of either one resume the other exactly.

    Args:
        make_a: Builds one pipeline.
        make_b: Builds the other.
        random_steps: Random steps resumed across.
        seed: Their seed.
    Raises:
        AssertionError: The pipelines differ, or a state of one does not resume the other exactly.
    """
    if make_a().spec_fingerprint != make_b().spec_fingerprint:
        raise AssertionError(f"spec fingerprints differ: {make_a().spec_fingerprint} vs {make_b().spec_fingerprint}")
    a, b = make_a().iter(), make_b().iter()
    assert_items_equal(list(b), list(a), "second pipeline: ")
    if _stats_of(a) != _stats_of(b):
        raise AssertionError(f"stats() at the end differ:\n{_stats_of(a)}\n{_stats_of(b)}")
    check_resumption(make_a, random_steps=random_steps, seed=seed, resume_dataset=make_b)
    check_resumption(make_b, random_steps=random_steps, seed=seed + 1, resume_dataset=make_a)


def _stats_of(iterator: Any) -> Any:
    stats = getattr(iterator, "stats", None)
    return stats() if stats is not None else None


def _brief(item: Any) -> str:
    text = repr(item)
    return text if len(text) < 400 else text[:400] + "..."


# -- small tokenizers of the families people download, trained with `tokenizers` (tests, benchmarks)

FAMILIES = ("wordpiece", "sp-bpe-metaspace", "sp-bpe-prepend", "unigram", "byte-level")


def family_tokenizer(kind: str, texts: list[str], directory: Path, vocab_size: int = 6000) -> str:
    """A tokenizer of family ``kind`` trained on ``texts`` with ``tokenizers``, saved as a
    directory (``tokenizer.json`` and ``tokenizer_config.json``), which is returned:

    - ``wordpiece``: BERT's kind (BertNormalizer, BertPreTokenizer, [CLS] ... [SEP]);
    - ``sp-bpe-metaspace`` / ``sp-bpe-prepend``: Llama-2's kind (BPE with byte fallback, "▁"
      for spaces from a Metaspace pre-tokenizer, or from Prepend + Replace normalizers and no
      pre-tokenizer, trained on words as SentencePiece trains; ``<s>`` before every text);
    - ``unigram``: T5's kind (NFKC, Metaspace, Unigram);
    - ``byte-level``: GPT-2's kind (a ByteLevel pre-tokenizer and decoder, BPE over bytes,
      ``<|endoftext|>`` its BOS and EOS).

    It trains on the texts' lines: a model with no pre-tokenizer takes a whole text as one
    word and trains ten times slower on whole documents, for a vocabulary of the same kind.

    Args:
        kind: The family (``wordpiece``, ``unigram``, ``sp-bpe-metaspace``...).
        texts: The training texts.
        directory: Where the files go.
        vocab_size: The vocabulary size.
    Returns:
        The directory holding the tokenizer files.
    """
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import Tokenizer as RustTokenizer

    lines = [line for text in texts for line in text.split("\n") if line.strip()]
    bos: str | None = "<s>"
    eos: str | None = "</s>"
    if kind == "wordpiece":
        tok = RustTokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.train_from_iterator(
            lines,
            trainers.WordPieceTrainer(
                vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            ),
        )
        sep, cls = tok.token_to_id("[SEP]"), tok.token_to_id("[CLS]")
        assert sep is not None and cls is not None
        tok.post_processor = processors.BertProcessing(("[SEP]", sep), ("[CLS]", cls))
        bos, eos = "[CLS]", "[SEP]"
    elif kind in ("sp-bpe-metaspace", "sp-bpe-prepend"):
        tok = RustTokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
        if kind == "sp-bpe-metaspace":
            tok.pre_tokenizer = pre_tokenizers.Metaspace()
        else:
            tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
            # trained on words, as SentencePiece trains (a run of "▁" may be a piece, as in
            # Llama-2's vocabulary), and saved without the split, as Llama-2's file is
            tok.pre_tokenizer = pre_tokenizers.Split(Regex("\u2581*[^\u2581]+|\u2581+"), "isolated")
            tok.decoder = decoders.Sequence(
                [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
            )
        alphabet = [f"<0x{b:02X}>" for b in range(256)]
        tok.train_from_iterator(
            lines, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>", *alphabet])
        )
        spec = json.loads(
            tok.to_str()
        )  # byte tokens belong to the model's vocabulary (as in Llama-2's file), not to the added tokens
        spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in alphabet]
        if kind == "sp-bpe-prepend":
            spec["pre_tokenizer"] = None
        tok = RustTokenizer.from_str(json.dumps(spec))
        start = tok.token_to_id("<s>")
        assert start is not None
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", start)]
        )
    elif kind == "byte-level":
        tok = RustTokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(
            lines,
            trainers.BpeTrainer(
                vocab_size=vocab_size,
                special_tokens=["<|endoftext|>"],
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            ),
        )
        bos = eos = "<|endoftext|>"
    elif kind == "unigram":
        tok = RustTokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.train_from_iterator(
            lines,
            trainers.UnigramTrainer(
                vocab_size=vocab_size, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>"
            ),
        )
        bos = None
    else:
        raise ValueError(f"family {kind!r} is not one of {FAMILIES}")
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": eos}
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return str(directory)


SENTENCEPIECE_KINDS = {"t5": ("unigram", "T5Tokenizer"), "llama2": ("bpe", "LlamaTokenizer")}


def sentencepiece_tokenizer(kind: str, texts: list[str], directory: Path, vocab_size: int = 4000) -> str:
    """A SentencePiece model trained on the lines of ``texts`` with SentencePiece's defaults
    (its ``nmt_nfkc`` normalization, a precompiled character map), saved as a directory the
    way a hub repository holds one (``tokenizer.model``, ``tokenizer_config.json``) and then
    converted by ``transformers``, which writes ``tokenizer.json`` beside it. ``kind``:

    - ``t5``: a Unigram model under ``T5Tokenizer`` (Precompiled normalizer, WhitespaceSplit then
      Metaspace, ``</s>`` after every text, 100 ``<extra_id_N>`` tokens);
    - ``llama2``: a BPE model with byte fallback under ``LlamaTokenizer`` (Metaspace that does
      not split, ``<s>`` before every text).

    Needs ``sentencepiece`` (the dev extra)."""
    import io

    import sentencepiece
    import transformers

    model_type, tokenizer_class = SENTENCEPIECE_KINDS[kind]
    lines = [line for text in texts for line in text.split("\n") if line.strip()]
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=model_type,
        byte_fallback=model_type == "bpe",
        minloglevel=2,
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.model").write_bytes(model.getvalue())
    (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": tokenizer_class}))
    transformers.AutoTokenizer.from_pretrained(str(directory)).save_pretrained(str(directory))
    return str(directory)


def tiny_tokenizer() -> Any:
    """A byte tokenizer made in memory, for tests of stages (where what a token is does not
    matter): one token per UTF-8 byte (byte-level BPE with no merges), ``<|endoftext|>`` as
    BOS, EOS and padding. Loads in milliseconds, needs no file, and makes documents long in
    tokens, so short texts fill many rows; the byte table engine (``beamtok._src.engines.byte_table``)
    encodes it at a few nanoseconds a token."""
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers import decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = RustTokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    end = "<|endoftext|>"
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=end, eos_token=end, pad_token=end)
    fast.name_or_path = "beamtok.testing.tiny_tokenizer"
    return fast

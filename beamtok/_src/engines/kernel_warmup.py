"""Compile the numba kernels of the compiled engines once, ahead of the first process that needs them.

The compiled byte-level BPE, the compiled SentencePiece-style BPE and the compiled Unigram are
numba kernels cached on disk (:func:`beamtok._src.engines.compiled_tables.compiled`). Until a cache
exists, every process that builds one of these engines compiles it (many seconds of CPU for
the three), and processes started together (Beam workers, DataLoader workers that spawn, the
ranks of a job) each compile. This module builds each engine on a small tokenizer of its family,
trained here on the package's own sample text, and encodes with it, so every kernel is compiled
and cached once::

    python -m beamtok._src.engines.kernel_warmup

``make setup`` and the worker image's Dockerfile run it. A machine whose CPU differs from the
one that compiled (numba keys a cache by CPU) compiles again on first use, as before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from beamtok._src.engines.byte_level_encoder import CompiledByteLevelEncoder
from beamtok._src.engines.cached_words import CompiledBPEEncoder, CompiledUnigramEncoder
from beamtok._src.engines.exact_encoder import ExactEncoder
from beamtok._src.engines.ranks import CL100K_PATTERN, tokenizer_json_from_ranks
from beamtok._src.engines.split_patterns import split_sample

__all__ = ["warm_kernels"]

VOCAB = 400  # pieces of the small SentencePiece-style BPE and Unigram: enough for words of several pieces


def _byte_level_file() -> str:
    """A byte-level BPE with cl100k's split and a few merges (the compiled byte-level BPE's form)."""
    ranks = {bytes([b]): b for b in range(256)}
    for token in (b"th", b"he", b"the", b" t", b" th", b" the", b"in", b"ing", b"  ", b"    "):
        ranks[token] = len(ranks)
    return tokenizer_json_from_ranks(ranks, CL100K_PATTERN, {"<|endoftext|>": len(ranks)})


def _trained_file(kind: str, texts: Sequence[str]) -> str:
    """A SentencePiece-style BPE (``bpe``) or Unigram (``unigram``) trained on ``texts``, with
    Metaspace and byte fallback as Llama-2's and T5's files have them."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    if kind == "bpe":
        alphabet = [f"<0x{b:02X}>" for b in range(256)]
        tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.train_from_iterator(
            texts, trainers.BpeTrainer(vocab_size=VOCAB + 256, special_tokens=["<unk>", *alphabet], show_progress=False)
        )
        spec = json.loads(tok.to_str())
        spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in alphabet]  # model tokens
        return json.dumps(spec)
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(
        texts,
        trainers.UnigramTrainer(vocab_size=VOCAB, special_tokens=["<unk>"], unk_token="<unk>", show_progress=False),
    )
    return str(tok.to_str())


def warm_kernels() -> dict[str, float]:
    """Build each compiled engine on a small file of its family and encode with it.

    Returns:
        Each engine's name and the seconds its build and first encoding took (long where its
        kernels were compiled, short where they were already cached).

    Raises:
        MissingExtra: numba is not installed (``pip install 'beamtok[compiled]'``).
    """
    texts = split_sample()
    sample = [" ".join(texts[:200]), *texts[:50]]
    files = {
        CompiledByteLevelEncoder: _byte_level_file(),
        CompiledBPEEncoder: _trained_file("bpe", texts),
        CompiledUnigramEncoder: _trained_file("unigram", texts),
    }
    took: dict[str, float] = {}
    for engine, serialized in files.items():
        started = time.perf_counter()
        name = f"kernel warmup ({engine.__name__})"  # names the file in messages only
        if engine is CompiledByteLevelEncoder:
            encoder = ExactEncoder(CompiledByteLevelEncoder(serialized, name))
        else:
            family = "SentencePiece-style BPE" if engine is CompiledBPEEncoder else "Unigram"
            encoder = ExactEncoder(engine(serialized, name, family))
        encoder.encode_batch(sample)
        took[encoder.engine_name] = time.perf_counter() - started
    return took


if __name__ == "__main__":
    for engine_name, seconds in warm_kernels().items():
        print(f"{engine_name}: ready in {seconds:.1f} s")

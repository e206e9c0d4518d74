"""A replica group of ``examples/torchft_train.py``'s loop over a composed stream: a mix (until
every source ends) of a cache read in a global shuffle and of files tokenized on the fly in
byte ranges. ``--cache DIR`` names the cache; the files are the shipped Shakespeare."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from beamtok import Dataset, load_tokenizer

ROOT = Path(__file__).resolve().parents[2]


def composed(cache: str) -> Dataset:
    """The stream every group reads (the test reads it once too, for the rows expected)."""
    tokenizer = load_tokenizer(str(ROOT / "data" / "tokenizers" / "gpt2"))
    files = (
        Dataset.from_files(str(ROOT / "data" / "corpus" / "shakespeare-00.jsonl"), split_bytes=300_000)
        .tokenize(tokenizer)
        .ensure_bos_eos()
        .concat_chunk(128)
    )
    shuffled = Dataset.from_cache(cache).global_shuffle(seed=7, window=64)
    return Dataset.mix([shuffled, files], [0.5, 0.5], seed=3, stop="all_exhausted").batch(8, tensors="torch")


def main() -> None:
    spec = importlib.util.spec_from_file_location("torchft_train", ROOT / "examples" / "torchft_train.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    args = example.parse_args()  # --cache names the cache the mix reads; the rest as the example's
    example.train(composed(args.cache), args)


if __name__ == "__main__":
    main()

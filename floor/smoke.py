"""The smoke set of the floor environment (``make floor``): with every core dependency at the
minimum ``pyproject.toml`` declares, build a cache with ``beamtok cache``, verify and read it,
and stream the same data on the fly, checkpointed and resumed. Exits non-zero on a failure."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from beamtok import Dataset

from constraints import floors

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
INPUTS = [
    str(ROOT / "data" / "corpus" / name)
    for name in ("shakespeare-00.jsonl", "shakespeare-01.jsonl", "shakespeare-05.jsonl.gz", "pydocs-00.jsonl.zst")
]


def check_floor_installed() -> None:
    """The environment holds the floors, not newer releases."""
    for name, version in floors((ROOT / "pyproject.toml").read_text()).items():
        installed = importlib.metadata.version(name)
        if installed.split(".")[: len(version.split("."))] != version.split(".") and not installed.startswith(
            version + "."
        ):
            raise SystemExit(f"floor environment: {name} {installed} installed, the declared minimum is {version}")
        print(f"floor: {name} {installed}")


def same(got: list[dict[str, np.ndarray]], want: list[dict[str, np.ndarray]], what: str) -> None:
    if len(got) != len(want):
        raise SystemExit(f"{what}: {len(got)} examples, expected {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        for key in ("input_ids", "segment_ids", "position_ids", "loss_mask"):
            if not np.array_equal(g[key], w[key]):
                raise SystemExit(f"{what}: example {i} differs in {key}")


def main() -> None:
    check_floor_installed()
    online = Dataset.from_files(INPUTS).tokenize(TOKENIZER).ensure_bos_eos().concat_chunk(512)
    expected = list(online)
    with tempfile.TemporaryDirectory() as tmp:
        for extra in ([], ["--parquet-compat"]):
            out = Path(tmp) / f"cache{len(extra)}"
            command = [
                sys.executable,
                "-m",
                "beamtok._src.cli",
                "cache",
                *INPUTS,
                "--output",
                str(out),
                "--tokenizer",
                TOKENIZER,
                "--seq-len",
                "512",
                "-q",
                *extra,
            ]
            subprocess.run(command, check=True)
            subprocess.run(
                [sys.executable, "-m", "beamtok._src.cli", "verify", str(out)], check=True, stdout=subprocess.DEVNULL
            )
            same(list(Dataset.from_cache(str(out))), expected, f"the cache built with {command[5:]}")
            print(
                f"floor: cache {' '.join(extra) or '(default)'}: {len(expected)} rows built, verified, read back equal to the stream"
            )
    stream = online.shuffle(window=32, seed=3).batch(4)
    whole = list(stream)
    iterator = iter(stream)
    for _ in range(5):
        next(iterator)
    state = iterator.state_dict()
    resumed = list(stream.iter(state))
    for i, (g, w) in enumerate(zip(resumed, whole[5:])):
        if not np.array_equal(g["input_ids"], w["input_ids"]):
            raise SystemExit(f"the stream resumed after 5 batches differs at batch {5 + i}")
    if len(resumed) != len(whole) - 5:
        raise SystemExit(f"the resumed stream has {len(resumed)} batches, expected {len(whole) - 5}")
    print(f"floor: stream of {len(whole)} batches resumed after 5: the same")


if __name__ == "__main__":
    main()

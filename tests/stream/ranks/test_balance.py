"""balance_ranks(): global batches dealt by attention cost; nothing lost or repeated between
ranks, the imbalance reported and lower than a plain split's, the same from a cache, exact on
resume, and a resume on another world size from any old rank's state."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from beamtok import ConfigError, Dataset
from beamtok._src.stream.ranks.balance import attention_cost, deal_rows
from beamtok.testing import check_equivalent, check_resumption

from conftest import CORPUS, ROOT, inspect_state, real_paragraphs, write_jsonl

TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[str]:
    """Short real paragraphs and long real docs pages, packed below into rows of very
    different attention cost (many short documents, or one long piece)."""
    root = tmp_path_factory.mktemp("balance")
    paras = real_paragraphs(120)
    paths = [
        str(write_jsonl(root / f"part-{i}.jsonl", [{"text": t} for t in paras[i * 40 : (i + 1) * 40]]))
        for i in range(3)
    ]
    return [*paths, str(CORPUS / "pydocs-00.jsonl.zst")]


def packed(corpus):
    return Dataset.from_files(corpus).tokenize(TOKENIZER).ensure_bos_eos().pack_documents(512, window=4).interleave(4)


def rows(batches) -> list[tuple[int, int]]:
    return [(int(s), int(i)) for b in batches for s, i in zip(b["shard"], b["index"])]


def test_costs_and_the_deal():
    row = {"input_ids": list(range(10)), "segment_ids": [1, 1, 1, 2, 2, 3, 3, 3, 3, 0]}
    assert attention_cost(row) == 9 + 4 + 16
    assert attention_cost({"input_ids": [0] * 7}) == 49
    # costs 9, 8, 7, 1, 1, 1 over 2 ranks of 3: 9 -> r0, 8 -> r1, 7 -> r1 (8 < 9), then the 1s fill r0
    assert deal_rows([9, 1, 8, 1, 7, 1], 2, 3) == [[0, 1, 3], [2, 4, 5]]
    for n in (7, 12):
        shares = deal_rows(list(range(n)), 3, -(-n // 3))
        assert sorted(i for s in shares for i in s) == list(range(n))


def test_ranks_share_each_global_batch_and_the_deal_is_balanced(corpus):
    world, size = 4, 3
    its = [packed(corpus).balance_ranks(size, rank=r, world_size=world).iter() for r in range(world)]
    per_rank = [list(it) for it in its]
    assert len({len(b) for b in per_rank}) == 1
    everything = rows(packed(corpus).batch(1))
    for step in range(len(per_rank[0]) - 1):  # every whole global batch
        got = [rows([per_rank[r][step]]) for r in range(world)]
        assert all(len(g) == size for g in got)
        assert sorted(x for g in got for x in g) == sorted(everything[step * world * size : (step + 1) * world * size])
    stats = its[0].stats()["balance"]
    assert stats == its[3].stats()["balance"]
    assert stats["dropped_rows"] == len(everything) % (world * size) < world  # a last global batch too short to share
    assert stats["imbalance"] < 1.1 and stats["imbalance_plain_split"] > 1.15


def test_the_cache_deals_the_same_and_resumes_exactly(corpus, tmp_path):
    pytest.importorskip("apache_beam")
    cached = packed(corpus).cache(str(tmp_path / "c"))
    check_equivalent(
        lambda: packed(corpus).balance_ranks(2, rank=1, world_size=3),
        lambda: cached.balance_ranks(2, rank=1, world_size=3),
        random_steps=6,
    )
    check_resumption(
        lambda: packed(corpus).shuffle(8, seed=1).balance_ranks(2, rank=2, world_size=3), random_steps=10, seed=2
    )


def test_resume_on_another_world_size_from_any_old_state(corpus):
    old_world, new_world, size, steps = 4, 3, 2, 5
    everything = Counter(rows(packed(corpus).batch(1)))
    consumed, states = Counter(), []
    for rank in range(old_world):
        it = packed(corpus).balance_ranks(size, rank=rank, world_size=old_world).iter()
        consumed.update(rows(itertools.islice(it, steps)))
        states.append(json.loads(json.dumps(it.state_dict())))
    assert all(s["pipeline"] == states[0]["pipeline"] for s in states)  # a global batch boundary, the same everywhere
    after = Counter()
    for rank in range(new_world):
        resumed = packed(corpus).balance_ranks(size, rank=rank, world_size=new_world).iter(states[rank % old_world])
        after.update(rows(resumed))
    assert not (consumed & after) and consumed + after == everything


def test_inspect_and_refusals(corpus, tmp_path):
    it = packed(corpus).balance_ranks(2, rank=0, world_size=2).iter()
    next(it)
    assert "stage 1 (balance_ranks): global batch 1 is next" in inspect_state(it.state_dict(), tmp_path)
    with pytest.raises(ConfigError, match="drop shard_by_rank"):
        packed(corpus).shard_by_rank(0, 2).balance_ranks(2, rank=0, world_size=2)
    with pytest.raises(ConfigError, match="rank"):
        packed(corpus).balance_ranks(2, rank=2, world_size=2)

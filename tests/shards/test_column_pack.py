"""concat_chunk cut column-wise (the in-process stream's way) makes exactly the rows, cursors
and document counts of the per-row packer (the cache writer's way), from every cursor."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from beamtok import Dataset
from beamtok._src.base.errors import StateError
from beamtok._src.core.spec import PackSpec
from beamtok._src.production.on_the_fly import OnTheFly
from beamtok._src.shards.column_chunker import ColumnChunker
from beamtok._src.shards.items import DocCounts, DocItem, Produced, ShardCursor
from beamtok._src.shards.packing import ShardPacker
from beamtok._src.shards.spans import SpanReader
from beamtok._src.transforms.sft import TokenDoc

from concat_oracle import ConcatChunker


def documents(seed: int, masks: bool) -> list[DocItem]:
    """Documents of every awkward length (empty, one token, exactly a row, many rows), some
    skipped, some with loss masks, some truncated."""
    rng = random.Random(seed)
    items = []
    for cursor in range(rng.randrange(0, 40)):
        if rng.random() < 0.15:
            items.append(DocItem(cursor, None, DocCounts(read=1, skipped={"empty": 1}), cursor))
            continue
        n = rng.choice([0, 1, 2, 7, 8, 9, rng.randrange(0, 50)])
        ids = np.array([rng.randrange(1, 1000) for _ in range(n)], dtype=np.int32)
        mask = (
            np.array([rng.randrange(0, 2) for _ in range(n)], dtype=np.int8) if masks and rng.random() < 0.5 else None
        )
        truncated = int(rng.random() < 0.1)
        items.append(
            DocItem(cursor, TokenDoc(ids, mask), DocCounts(read=1, emitted=1, truncated_docs=truncated), cursor)
        )
    return items


def per_row(items: list[DocItem], pack: PackSpec, start: ShardCursor, supervised: bool) -> list[Produced]:
    assert pack.seq_len is not None
    packer = ConcatChunker(pack.seq_len, pack.pad_id, pack.remainder)
    return list(ShardPacker(3, start, packer, supervised).run(items))


def column_wise(items: list[DocItem], pack: PackSpec, start: ShardCursor, supervised: bool) -> list[Produced]:
    return list(SpanReader(ColumnChunker(3, start, pack, supervised).spans(items)))


def assert_same(got: list[Produced], want: list[Produced], where: str) -> None:
    assert len(got) == len(want), where
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.cursor == b.cursor, f"{where}, output {k}"
        assert a.counts == b.counts, f"{where}, output {k}"
        if b.example is None:
            assert a.example is None, f"{where}, output {k}"
            continue
        assert a.example is not None
        assert list(a.example) == list(b.example), f"{where}, output {k}"
        for key, value in b.example.items():
            got_value: Any = a.example[key]
            if isinstance(value, np.ndarray):
                assert got_value.dtype == value.dtype and np.array_equal(got_value, value), (
                    f"{where}, output {k}, {key}"
                )
            else:
                assert got_value == value, f"{where}, output {k}, {key}"


@pytest.mark.parametrize("remainder", ["pad", "drop", "keep"])
@pytest.mark.parametrize("supervised", [False, True])
def test_the_same_rows_cursors_and_counts_as_the_per_row_packer_from_every_cursor(
    remainder: str, supervised: bool
) -> None:
    pack = PackSpec("concat", 8, pad_id=0, remainder=remainder)  # type: ignore[arg-type]
    for seed in range(60):
        items = documents(seed, masks=supervised)
        want = per_row(items, pack, ShardCursor(), supervised)
        assert_same(column_wise(items, pack, ShardCursor(), supervised), want, f"seed {seed} from the start")
        for k, produced in enumerate(want):  # resume after every output, as a restored state does
            cursor = produced.cursor
            if cursor.done:
                continue
            rest = [item for item in items if item.cursor >= cursor.doc]
            expected = per_row(rest, pack, cursor, supervised)
            assert_same(column_wise(rest, pack, cursor, supervised), expected, f"seed {seed} after output {k}")


def test_blocks_grow_and_cut_many_rows_at_once() -> None:
    """Long documents give blocks of many rows (what makes it fast), still the same rows."""
    pack = PackSpec("concat", 16, pad_id=0)
    ids = np.arange(1, 5000, dtype=np.int32)
    items = [DocItem(i, TokenDoc(ids[: 100 * (i + 1)]), DocCounts(read=1, emitted=1), i) for i in range(12)]
    spans = list(ColumnChunker(0, ShardCursor(), pack).spans(items))
    assert max(len(s.block) for s in spans if s.block is not None) > 8
    assert_same(
        column_wise(items, pack, ShardCursor(), False), per_row(items, pack, ShardCursor(), False), "long documents"
    )


def test_the_stream_cuts_concat_chunk_column_wise_on_real_text(
    tokenizer_dir: str, make_shards: Callable[..., list[str]]
) -> None:
    """On real text and a real tokenizer: the in-process backend's blocks give the rows of
    the per-row step, shard by shard, from the start and from a cursor inside a document."""
    ds = Dataset.from_files(make_shards(3, docs_per_shard=20)).tokenize(tokenizer_dir).ensure_bos_eos().concat_chunk(64)
    backend = OnTheFly(ds.spec)
    assert backend.has_spans
    for shard in ds.shards:
        want = list(backend.open(shard, ShardCursor()))
        spans = backend.open_spans(shard, ShardCursor())
        assert spans is not None
        assert_same(list(SpanReader(spans)), want, shard.url)
        middle = want[len(want) // 2].cursor
        spans = backend.open_spans(shard, middle)
        assert spans is not None
        assert_same(list(SpanReader(spans)), list(backend.open(shard, middle)), f"{shard.url} from {middle}")


@pytest.mark.parametrize("cursor", [ShardCursor(0, 2, 50), ShardCursor(0, 2, 5)])
def test_a_cursor_naming_a_token_that_does_not_exist_is_refused_like_the_per_row_packer(cursor: ShardCursor) -> None:
    pack = PackSpec("concat", 8, pad_id=0)
    ids = np.arange(1, 11, dtype=np.int32)
    docs = [DocItem(i, TokenDoc(ids) if i != 2 else None, DocCounts(read=1, emitted=1), i) for i in range(2, 5)]
    with pytest.raises(StateError, match="token offset") as per_row_error:
        per_row(docs, pack, cursor, False)
    with pytest.raises(StateError, match="token offset") as column_error:
        column_wise(docs, pack, cursor, False)
    assert str(column_error.value) == str(per_row_error.value)

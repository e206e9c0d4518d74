"""A split file's concat_chunk rows packed in parallel: each row group by the range holding its
first token, joined under one footer. The shard file is byte for byte the unsplit build's, for
every remainder policy, skipped documents on range bounds, loss masks, a file with no row, row
groups spanning many ranges, and on two worker processes; the footer codec round-trips."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_split_build import bad_lines_file, same_cache

from beamtok import Dataset
from beamtok._src.cache.build.parquet_join import GroupsOf, join_row_groups, read_footer
from beamtok._src.cache.build.range_pack import TASKS_PER_RANGE, RangeTokens, plan_pack_tasks
from beamtok._src.cache.build.ranges import plan_ranges
from beamtok._src.cache.format.schema import PARQUET_OPTIONS, cache_schema, examples_to_table
from beamtok._src.cache.format.thrift_compact import decode_struct, encode_struct
from beamtok._src.shards.items import DocCounts
from beamtok._src.sources.urls import Shard

from conftest import CORPUS, ROOT

pytest.importorskip("apache_beam")
TOKENIZER = str(ROOT / "data" / "tokenizers" / "gpt2")
BOOK = str(CORPUS / "shakespeare-00.jsonl")  # ~940 KB of real text
SPLIT = 40_000  # ~24 ranges of ~10k tokens


def concat(path: str, seq_len: int = 64, remainder: str = "pad", on_error: str = "raise") -> Dataset:
    return (
        Dataset.from_files(path, on_error=on_error)
        .tokenize(TOKENIZER)
        .ensure_bos_eos()
        .concat_chunk(seq_len, remainder=remainder)
    )


def build_pair(make, tmp_path: Path, rows: int, split: int = SPLIT, **options) -> tuple[Path, Path]:
    whole, split_dir = tmp_path / "whole", tmp_path / "split"
    make().cache(str(whole), split_bytes=None, progress=False, row_group_rows=rows)
    make().cache(str(split_dir), split_bytes=split, progress=False, row_group_rows=rows, **options)
    return split_dir, whole


def groups_of(cache: Path) -> int:
    return sum(pq.ParquetFile(p).metadata.num_row_groups for p in (cache / "shards").glob("*.parquet"))


@pytest.mark.parametrize("remainder", ["pad", "drop", "keep"])
@pytest.mark.parametrize(
    "rows", [16, 50, 700]
)  # many groups inside a range, a few per range, one across several ranges
def test_parallel_packing_writes_the_unsplit_file(tmp_path, remainder, rows):
    split, whole = build_pair(lambda: concat(BOOK, remainder=remainder), tmp_path, rows)
    same_cache(split, whole)
    assert groups_of(whole) > 3


def test_many_pack_tasks_are_planned_for_a_split_file():
    """The parallel path is really taken: every range holding a group's first token packs."""
    spec = concat(BOOK).spec
    ranges = plan_ranges(Shard(0, BOOK), spec.source, SPLIT)
    from beamtok._src.shards.processor import ShardProcessor

    processor = ShardProcessor(spec)
    reported = [
        RangeTokens(
            p.number,
            p.count,
            f"r{p.number}",
            sum(len(d.value) for d in processor.documents(Shard(0, BOOK), p.start, p.stop) if d.value is not None),
        )
        for p in ranges
    ]
    tasks = plan_pack_tasks(0, reported, 64, 50, "pad")
    assert {t.number for t in tasks} == set(range(len(ranges))) and len(ranges) > 20  # every range packs
    assert_even_tasks(tasks, 50, total_rows=-(-sum(r.tokens for r in reported) // 64))
    assert tasks[0].first_row == 0 and tasks[-1].stop_row is None
    assert all(a.stop_row == b.first_row for a, b in itertools.pairwise(tasks))
    assert all(t.first_row % 50 == 0 for t in tasks)
    total = sum(r.tokens for r in reported)
    for t in tasks:  # a task's first row starts inside its own range
        before = sum(r.tokens for r in reported[: t.number])
        assert (
            before == t.tokens_before and before <= t.first_row * 64 < before + reported[t.number].tokens
        ) or t.first_row == 0
    assert (tasks[-1].first_row - 1) * 64 < total


def assert_even_tasks(tasks: list, group: int, total_rows: int) -> None:
    """Each range's tasks: a group each, or TASKS_PER_RANGE runs of groups differing by one at most."""
    for _, run in itertools.groupby(tasks, key=lambda t: t.number):
        sizes = [-(-((t.stop_row if t.stop_row is not None else total_rows) - t.first_row) // group) for t in run]
        assert len(sizes) <= TASKS_PER_RANGE
        assert set(sizes) == {1} or (len(sizes) == TASKS_PER_RANGE and max(sizes) - min(sizes) <= 1), sizes


def test_a_range_of_many_groups_is_packed_by_a_few_even_tasks():
    # rows of 10 tokens, groups of 1 row: range 0 holds the first tokens of 10 groups, range 1 of 1
    ranges = [RangeTokens(0, 2, "a", 100), RangeTokens(1, 2, "b", 10)]
    tasks = plan_pack_tasks(3, ranges, 10, 1, "pad")
    assert [(t.number, t.first_row, t.stop_row) for t in tasks] == [
        (0, 0, 2),
        (0, 2, 5),
        (0, 5, 7),
        (0, 7, 10),
        (1, 10, None),
    ]
    assert_even_tasks(tasks, 1, total_rows=11)


def test_plan_pack_tasks_edges():
    ranges = [
        RangeTokens(0, 4, "a", 0),
        RangeTokens(1, 4, "b", 100),
        RangeTokens(2, 4, "c", 0),
        RangeTokens(3, 4, "d", 30),
    ]
    # rows of 10 tokens, groups of 2 rows: groups start at tokens 0, 20, ..., 120; range 1 holds [0, 100), range 3 [100, 130)
    tasks = plan_pack_tasks(7, ranges + ranges[:1], 10, 2, "pad")  # a range reported twice counts once
    # range 1 holds the first tokens of groups 1-4: a task each (range 3: groups 5 and 6)
    assert [(t.number, t.first_row, t.stop_row, t.tokens_before) for t in tasks] == [
        (0, 0, 2, 0),
        (1, 2, 4, 0),
        (1, 4, 6, 0),
        (1, 6, 8, 0),
        (1, 8, 10, 0),
        (3, 10, 12, 100),
        (3, 12, None, 100),
    ]
    # groups of 3 rows start at tokens 0, 30, 60, 90, 120; the last row (tokens 120-129) is whole only with 130 tokens
    short = [*ranges[:3], RangeTokens(3, 4, "d", 29)]
    assert [(t.number, t.first_row, t.stop_row) for t in plan_pack_tasks(7, ranges, 10, 3, "drop")] == [
        (0, 0, 3),
        (1, 3, 6),
        (1, 6, 9),
        (1, 9, 12),
        (3, 12, None),
    ]
    assert [(t.number, t.first_row, t.stop_row) for t in plan_pack_tasks(7, short, 10, 3, "drop")] == [
        (0, 0, 3),
        (1, 3, 6),
        (1, 6, 9),
        (1, 9, None),
    ]
    assert [(t.number, t.first_row, t.stop_row) for t in plan_pack_tasks(7, short, 10, 3, "keep")] == [
        (0, 0, 3),
        (1, 3, 6),
        (1, 6, 9),
        (1, 9, 12),
        (3, 12, None),
    ]
    nothing = [RangeTokens(0, 2, "a", 0), RangeTokens(1, 2, "b", 0)]
    assert [(t.number, t.first_row, t.stop_row) for t in plan_pack_tasks(7, nothing, 10, 2, "pad")] == [(0, 0, None)]
    from beamtok._src.base.errors import CacheError

    with pytest.raises(CacheError, match="ranges \\[0, 2\\] reached the packer"):
        plan_pack_tasks(7, [RangeTokens(0, 3, "a", 5), RangeTokens(2, 3, "c", 5)], 10, 2, "pad")


def test_skipped_documents_on_range_bounds_are_counted_as_unsplit(tmp_path, paragraphs):
    path = bad_lines_file(tmp_path / "bad.jsonl", paragraphs(400), range(0, 400, 9))
    split, whole = build_pair(lambda: concat(str(path), 32, on_error="skip"), tmp_path, 4, split=2000)
    same_cache(split, whole)
    assert json.loads((split / "manifest.json").read_text())["totals"]["documents"]["skipped"]


def test_loss_masks_and_a_file_without_a_row(tmp_path, paragraphs):
    paras = paragraphs(240)
    rows = [json.dumps({"prompt": paras[i], "completion": paras[i + 1]}) for i in range(0, 240, 2)]
    sft = tmp_path / "sft.jsonl"
    sft.write_text("\n".join(rows) + "\n", encoding="utf-8")
    split, whole = build_pair(
        lambda: Dataset.from_files(str(sft)).tokenize_sft(TOKENIZER, max_length=200).concat_chunk(128),
        tmp_path / "sft",
        5,
        split=3000,
    )
    same_cache(split, whole)
    assert pq.read_table(split / "shards" / "shard-00000.parquet").column("loss_mask").null_count < groups_of(split) * 5
    tiny = tmp_path / "tiny.jsonl"  # fewer tokens than one row, dropped: no row at all
    tiny.write_text("".join(json.dumps({"text": w}) + "\n" for w in ["a", "b", "c", "d"] * 30), encoding="utf-8")
    split, whole = build_pair(lambda: concat(str(tiny), 4096, remainder="drop"), tmp_path / "tiny", 3, split=200)
    same_cache(split, whole)
    assert json.loads((split / "manifest.json").read_text())["totals"]["rows"] == 0


def test_parallel_packing_on_two_worker_processes(tmp_path):
    split, whole = build_pair(
        lambda: concat(BOOK), tmp_path, 50, direct_running_mode="multi_processing", direct_num_workers=2
    )
    same_cache(split, whole)


def _examples(n: int, seed: int) -> tuple[list[dict], list[DocCounts]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        cut = int(rng.integers(1, 63))
        segments = np.concatenate([np.ones(cut, np.int32), np.full(64 - cut, 2, np.int32)])
        positions = np.concatenate([np.arange(cut), np.arange(64 - cut)]).astype(np.int32)
        out.append(dict(input_ids=rng.integers(0, 50_000, 64).astype(np.int32), segment_ids=segments, position_ids=positions,
                        loss_mask=np.ones(64, np.int8), shard=0, index=i, doc=i, token=0))  # fmt: skip
    return out, [DocCounts(1, 1) for _ in out]


def _parquet(examples: list[dict], counts: list[DocCounts], groups: list[tuple[int, int]], **options) -> bytes:
    sink = io.BytesIO()
    writer = pq.ParquetWriter(sink, cache_schema(), **{**PARQUET_OPTIONS, **options})
    for a, b in groups:
        writer.write_table(examples_to_table(examples[a:b], counts[a:b]), row_group_size=b - a)
    writer.close()
    return sink.getvalue()


def test_joined_row_groups_are_the_one_writer_file():
    examples, counts = _examples(100, 0)
    groups = [(0, 30), (30, 60), (60, 90), (90, 100)]
    whole = _parquet(examples, counts, groups)
    parts = [
        _parquet(examples, counts, groups[:1]),
        _parquet(examples, counts, groups[1:3]),
        _parquet(examples, counts, groups[3:]),
    ]
    out = io.BytesIO()
    assert join_row_groups([GroupsOf(pa.BufferReader(p), None, f"part {i}") for i, p in enumerate(parts)], out) == 100
    assert out.getvalue() == whole
    # the codec gives back the footer it read, byte for byte
    length = int.from_bytes(whole[-8:-4], "little")
    footer = whole[-8 - length : -8]
    fields, used = decode_struct(footer)
    assert used == length and encode_struct(fields) == footer
    assert [e[0] for e in read_footer(pa.BufferReader(whole)).extents] == sorted(
        e[0] for e in read_footer(pa.BufferReader(whole)).extents
    )
    assert pq.read_table(io.BytesIO(out.getvalue())).equals(pq.read_table(io.BytesIO(whole)))


def test_join_refuses_parts_it_cannot_copy():
    examples, counts = _examples(40, 1)
    plain = _parquet(examples, counts, [(0, 20)])
    with pytest.raises(ValueError, match="page index"):
        join_row_groups(
            [GroupsOf(pa.BufferReader(_parquet(examples, counts, [(0, 20)], write_page_index=True)), None, "indexed")],
            io.BytesIO(),
        )
    other = _parquet(examples, counts, [(0, 20)], compression="snappy")
    other_schema = io.BytesIO()
    pq.write_table(pa.table({"x": [1, 2]}), other_schema)
    with pytest.raises(ValueError, match="another schema or writer"):
        join_row_groups(
            [
                GroupsOf(pa.BufferReader(plain), None, "a"),
                GroupsOf(pa.BufferReader(other_schema.getvalue()), None, "b"),
            ],
            io.BytesIO(),
        )
    joined = io.BytesIO()  # another codec is the same schema: still a valid file, each chunk says its codec
    join_row_groups([GroupsOf(pa.BufferReader(plain), None, "a"), GroupsOf(pa.BufferReader(other), None, "b")], joined)
    assert pq.read_table(io.BytesIO(joined.getvalue())).num_rows == 40
    with pytest.raises(ValueError, match="not a Parquet file"):
        join_row_groups([GroupsOf(pa.BufferReader(b"PAR1 nothing"), None, "junk")], io.BytesIO())


def test_a_retried_join_returns_the_shard_it_wrote(tmp_path):
    """A bundle retried after the join removed its parts finds the shard written, not an error."""
    from beamtok._src.beam.build_steps import JoinPartsFn
    from beamtok._src.cache.build.range_pack import pack_part
    from beamtok._src.cache.build.ranges import range_file, write_range_file
    from beamtok._src.cache.format.storage import Storage
    from beamtok._src.shards.processor import ShardProcessor

    ds = concat(BOOK)
    storage, processor, shard = Storage(str(tmp_path)), ShardProcessor(ds.spec), ds.shards[0]
    reported = []
    for part in plan_ranges(shard, ds.spec.source, SPLIT):
        written = write_range_file(storage, range_file(part), processor.documents(shard, part.start, part.stop))
        reported.append(RangeTokens(part.number, part.count, range_file(part), written.tokens))
    parts = [pack_part(storage, processor, task, 50) for task in plan_pack_tasks(0, reported, 64, 50, "pad")]
    join = JoinPartsFn(ds.spec, ds.shards, str(tmp_path))
    join.setup()
    first = list(join.process((0, parts)))
    assert not any(storage.exists(p.file) for p in parts) and not storage.exists(reported[0].file)
    assert list(join.process((0, parts))) == first
    assert len(parts) > 20

"""Pack the rows of a split file on many workers, into the one file of the unsplit build.

``concat_chunk`` cuts a row every ``seq_len`` tokens of a shard's documents joined end to
end, so row ``R`` starts at token ``R * seq_len``. Once every range of a file is tokenized
and its token count known (:class:`RangeTokens`), each row group — ``group`` rows, as the
writer lays them out — is packed by a task that starts in the range holding its first token,
from that token's cursor: the cursor a resumed stream starts from, so the rows, their provenance, cursors and
document counts are the unsplit run's (:class:`beamtok._src.shards.packing.ShardPacker`'s resume rule). A
task reads on into the next ranges' files for its last rows, writes its complete row groups
as a Parquet file of its own (:func:`pack_part`), and :func:`join_parts` copies those row
groups one after another under one footer (``parquet_join``): byte for byte the file the
unsplit build writes. Nothing is serial per file but that copy.

Only packers whose rows are a function of token offsets take this path (``concat``); the
others pack a split file's ranges in order on one worker (``beam/build.py``).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from beamtok._src.base.errors import CacheError
from beamtok._src.cache.build.parquet_join import GroupsOf, join_row_groups
from beamtok._src.cache.build.ranges import RANGES_DIR, range_document_lengths, read_range_file
from beamtok._src.cache.build.writer import WrittenRows, record_shard, write_row_groups
from beamtok._src.cache.format.manifest import ShardEntry, shard_file
from beamtok._src.cache.format.storage import HashingWriter, Storage
from beamtok._src.core.spec import Spec
from beamtok._src.shards.document_lengths import DocumentLengths
from beamtok._src.shards.items import DocItem, Produced, ShardCursor
from beamtok._src.shards.processor import ShardProcessor
from beamtok._src.sources.urls import Shard

__all__ = [
    "PackTask",
    "PackedPart",
    "RangeTokens",
    "join_parts",
    "ordered_ranges",
    "pack_part",
    "packs_in_parallel",
    "part_file",
    "plan_pack_tasks",
]


def packs_in_parallel(spec: Spec) -> bool:
    """Whether a split file's rows can be packed range by range (rows cut by token offset)."""
    return spec.tokenized and spec.pack is not None and spec.pack.packing.CUTS_BY_TOKEN_OFFSET


@dataclass(frozen=True)
class RangeTokens:
    """Range ``number`` of ``count`` of a shard, tokenized into ``file``: ``tokens`` tokens."""

    number: int
    count: int
    file: str
    tokens: int


# A range's row groups are packed by this many tasks at most, a group or more each. Tasks of
# one group keep workers evenly loaded (a runner deals tasks out by count, and a range holds
# 2-3 default groups, so tasks of a whole range's groups differed by a group); the cap bounds
# the reading each task does from its range's start to its first row when groups are small.
TASKS_PER_RANGE = 4


@dataclass(frozen=True)
class PackTask:
    """Pack rows ``[first_row, stop_row)`` of shard ``shard`` (``stop_row`` None: to its end),
    whose first token lies in range ``number``; ``files`` are all the shard's range files,
    ``tokens_before`` the tokens of the ranges before ``number``."""

    shard: int
    number: int
    files: tuple[str, ...]
    tokens_before: int
    first_row: int
    stop_row: int | None


@dataclass(frozen=True)
class PackedPart:
    """What a :class:`PackTask` wrote: rows from ``first_row`` in ``file``, and their counts."""

    shard: int
    number: int
    first_row: int
    file: str
    written: WrittenRows
    range_files: tuple[str, ...]


def part_file(shard: int, first_row: int) -> str:
    """Where the task packing shard ``shard`` from row ``first_row`` writes its row groups."""
    return f"{RANGES_DIR}/shard-{shard:05d}-rows-from-{first_row:010d}.parquet"


def ordered_ranges(shard: int, ranges: Iterable[RangeTokens]) -> list[RangeTokens]:
    """A split shard's tokenized ranges in order, each once (a retried bundle may report a
    range twice); all of them, or CacheError."""
    ordered = sorted(set(ranges), key=lambda r: r.number)
    numbers = [r.number for r in ordered]
    if not ordered or numbers != list(range(ordered[0].count)):
        raise CacheError(
            f"shard {shard}: ranges {numbers} reached the packer, expected 0..{(ordered[0].count if ordered else 0) - 1}"
        )
    return ordered


def plan_pack_tasks(
    shard: int, ranges: Iterable[RangeTokens], seq_len: int, group: int, remainder: str
) -> list[PackTask]:
    """The tasks of each range holding the first token of one or more row groups: one per
    group, or :data:`TASKS_PER_RANGE` runs of its groups as even as can be where it holds
    more (range 0 always packs group 0, from the shard's start, so a shard without a row
    still gets its file)."""
    ranges = ordered_ranges(shard, ranges)
    files = tuple(r.file for r in ranges)
    before = list(itertools.accumulate((r.tokens for r in ranges[:-1]), initial=0))
    total = before[-1] + ranges[-1].tokens

    def row_exists(row: int) -> bool:
        return (row + 1) * seq_len <= total or (row * seq_len < total and remainder != "drop")

    owners = [0]  # the range holding each row group's first token
    while row_exists(len(owners) * group):
        owners.append(bisect.bisect_right(before, len(owners) * group * seq_len) - 1)
    tasks = []
    for number, run in itertools.groupby(range(len(owners)), key=owners.__getitem__):
        groups = list(run)
        count = min(len(groups), TASKS_PER_RANGE)
        for k in range(count):
            first, stop = groups[k * len(groups) // count], groups[(k + 1) * len(groups) // count - 1] + 1
            tasks.append(
                PackTask(
                    shard, number, files, before[number], first * group, stop * group if stop < len(owners) else None
                )
            )
    return tasks


def _from_row(
    items: Iterator[DocItem], row: int, token: int, seen: int, where: str
) -> tuple[ShardCursor, Iterator[DocItem]]:
    """The cursor of row ``row``, which starts at the shard's token ``token`` (``seen``: tokens
    before ``items``), and the documents from the one holding that token on."""
    for item in items:
        if item.value is None:
            continue
        if seen + len(item.value) > token:
            return ShardCursor(row, item.cursor, token - seen), itertools.chain([item], items)
        seen += len(item.value)
    raise CacheError(f"{where}: holds fewer tokens than its range reported (token {token} not found)")


def pack_part(
    storage: Storage, processor: ShardProcessor, task: PackTask, group: int, *, parquet_compat: bool = False
) -> PackedPart:
    """Pack ``task``'s rows into its own Parquet file of whole row groups."""
    seq_len = processor.spec.pack.seq_len if processor.spec.pack is not None else None
    items: Iterator[DocItem] = itertools.chain.from_iterable(
        read_range_file(storage, rel) for rel in task.files[task.number :]
    )
    if task.first_row == 0:
        start = ShardCursor()
    else:
        where = storage.display(task.files[task.number])
        start, items = _from_row(items, task.first_row, task.first_row * (seq_len or 0), task.tokens_before, where)
    produced: Iterable[Produced] = processor.pack(task.shard, items, start)
    if task.stop_row is not None:
        produced = itertools.islice(produced, task.stop_row - task.first_row)
    rel = part_file(task.shard, task.first_row)
    with storage.writing(rel) as sink:
        written = write_row_groups(
            sink, produced, group, empty_group=task.first_row == 0, parquet_compat=parquet_compat
        )
    expected = None if task.stop_row is None else task.stop_row - task.first_row
    if (written.rows == 0 and task.first_row > 0) or (expected is not None and written.rows != expected):
        raise CacheError(
            f"shard {task.shard}: range {task.number} packed {written.rows} rows from row {task.first_row}, expected {expected}"
        )
    return PackedPart(task.shard, task.number, task.first_row, rel, written, task.files)


def join_parts(storage: Storage, shard: Shard, parts: Sequence[PackedPart], fingerprint: str) -> ShardEntry:
    """Write ``shard``'s file from its packed parts (row groups copied in row order), its
    sidecar, and remove the parts and the range files."""
    parts = sorted({p.first_row: p for p in parts}.values(), key=lambda p: p.first_row)  # a retried task's part once
    if not parts or parts[0].first_row != 0:
        raise CacheError(f"shard {shard.index}: no packed part starts at row 0")
    row = 0
    for part in parts:
        if part.first_row != row:
            raise CacheError(
                f"shard {shard.index}: the packed parts do not follow each other (rows from {part.first_row}, expected {row})"
            )
        row += part.written.rows
    files = [storage.open_input(p.file) for p in parts]
    try:
        with storage.writing(shard_file(shard.index)) as sink:
            hashing = HashingWriter(sink)
            join_row_groups([GroupsOf(f, None, storage.display(p.file)) for f, p in zip(files, parts)], hashing)
    finally:
        for f in files:
            f.close()
    written = sum((p.written for p in parts), WrittenRows())
    lengths = sum((range_document_lengths(storage, rel) for rel in parts[0].range_files), DocumentLengths())
    entry = record_shard(storage, shard, hashing, written, fingerprint, lengths)
    for rel in [p.file for p in parts] + list(parts[0].range_files):
        storage.delete(rel)
    return entry

"""Join row groups written by separate Parquet writers into one file, without re-encoding.

A column chunk's bytes (pages, their headers, statistics and checksums) do not depend on
where in a file they stand: only the footer holds absolute offsets. So row groups that
several workers encoded with the same schema and options can be copied one after another
into a new file under a footer made from theirs — offsets moved, ordinals renumbered, row
counts added — and the result is byte for byte the file one writer would have written with
the same row groups. That lets a split input file's rows be packed and encoded by many
workers and still land in the one shard file of the unsplit build.

The footer is decoded and re-encoded with :mod:`beamtok._src.cache.format.thrift_compact`. Files with a
page index or bloom filters (stored apart from their row groups) are refused: the cache's
writer makes neither.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from beamtok._src.cache.format.thrift_compact import (
    Field,
    ThriftList,
    decode_struct,
    encode_struct,
    field_value,
    set_field,
)

__all__ = ["GroupsOf", "ParquetFooter", "join_row_groups", "read_footer"]

MAGIC = b"PAR1"
COPY_BYTES = 8 << 20

# FileMetaData
_FILE_NUM_ROWS, _FILE_ROW_GROUPS = 3, 4
_FILE_SAME = (1, 2, 5, 6, 7)  # version, schema, key/value metadata, created_by, column orders: equal in every part
# RowGroup
_GROUP_COLUMNS, _GROUP_NUM_ROWS, _GROUP_FILE_OFFSET, _GROUP_ORDINAL = 1, 3, 5, 7
# ColumnChunk
_CHUNK_FILE_OFFSET, _CHUNK_META = 2, 3
_CHUNK_APART = (4, 5, 6, 7)  # offset and column index: stored after the row groups
# ColumnMetaData
_META_COMPRESSED, _META_DATA_PAGE, _META_INDEX_PAGE, _META_DICTIONARY_PAGE, _META_BLOOM = 7, 9, 10, 11, 14


@dataclass
class ParquetFooter:
    """A Parquet file's decoded footer and the byte extent of each of its row groups."""

    fields: list[Field]
    extents: list[tuple[int, int]]  # [start, stop) of each row group's column chunks

    @property
    def row_groups(self) -> list[list[Field]]:
        groups: ThriftList = field_value(self.fields, _FILE_ROW_GROUPS)
        return groups.items

    def rows(self, group: int) -> int:
        return int(field_value(self.row_groups[group], _GROUP_NUM_ROWS))


@dataclass(frozen=True)
class GroupsOf:
    """Row groups ``groups`` (in this order; None: all) of the Parquet file ``file`` (an open
    random-access file)."""

    file: Any
    groups: Sequence[int] | None
    name: str = "a part"


def read_footer(f: Any, name: str = "a Parquet file") -> ParquetFooter:
    """Decode the footer of the random-access file ``f`` (with ``size()`` and ``read_at``)."""
    size = f.size()
    tail = f.read_at(8, size - 8) if size >= 12 else b""
    if len(tail) != 8 or tail[4:] != MAGIC or f.read_at(4, 0) != MAGIC:
        raise ValueError(f"{name}: not a Parquet file")
    length = int.from_bytes(tail[:4], "little")
    data = f.read_at(length, size - 8 - length)
    fields, used = decode_struct(data)
    if used != length:
        raise ValueError(f"{name}: its footer is {length} bytes, its metadata {used}")
    footer = ParquetFooter(fields, [])
    footer.extents = [_extent(group, name, i) for i, group in enumerate(footer.row_groups)]
    return footer


def _extent(group: list[Field], name: str, number: int) -> tuple[int, int]:
    """Where a row group's column chunks lie. An offset of 0 is no position (the file starts
    with its magic): a column of an empty row group may have no page at all."""
    start, stop, total = None, 0, 0
    for chunk in field_value(group, _GROUP_COLUMNS).items:
        meta = field_value(chunk, _CHUNK_META)
        if (
            meta is None
            or any(field_value(chunk, k) is not None for k in _CHUNK_APART)
            or field_value(meta, _META_BLOOM) is not None
        ):
            raise ValueError(f"{name}: row group {number} has metadata stored apart from it (page index, bloom filter)")
        offsets = [o for o in (field_value(meta, _META_DICTIONARY_PAGE), field_value(meta, _META_DATA_PAGE)) if o]
        size = int(field_value(meta, _META_COMPRESSED))
        if not offsets:
            if size:
                raise ValueError(f"{name}: row group {number} has a column of {size} bytes at no offset")
            continue
        start = min(offsets) if start is None else min(start, *offsets)
        stop = max(stop, min(offsets) + size)
        total += size
    if start is None:
        return 0, 0
    if stop - start != total:
        raise ValueError(f"{name}: row group {number}'s column chunks are not one contiguous run of bytes")
    return start, stop


def _moved(group: list[Field], shift: int, ordinal: int) -> list[Field]:
    group = copy.deepcopy(group)
    for chunk in field_value(group, _GROUP_COLUMNS).items:
        if field_value(chunk, _CHUNK_FILE_OFFSET):
            set_field(chunk, _CHUNK_FILE_OFFSET, field_value(chunk, _CHUNK_FILE_OFFSET) + shift)
        meta = field_value(chunk, _CHUNK_META)
        for key in (_META_DATA_PAGE, _META_INDEX_PAGE, _META_DICTIONARY_PAGE):
            if field_value(meta, key):
                set_field(meta, key, field_value(meta, key) + shift)
    if field_value(group, _GROUP_FILE_OFFSET):
        set_field(group, _GROUP_FILE_OFFSET, field_value(group, _GROUP_FILE_OFFSET) + shift)
    if field_value(group, _GROUP_ORDINAL) is not None:
        set_field(group, _GROUP_ORDINAL, ordinal)
    return group


def join_row_groups(parts: Sequence[GroupsOf], sink: Any) -> int:
    """Write one Parquet file to ``sink`` (anything with ``write(bytes)``): the row groups of
    ``parts``, in order, under one footer. Every part must come from a writer with the same
    schema and options (checked on the footer's schema and metadata). Returns the rows written."""
    if not parts:
        raise ValueError("nothing to join")
    footers = [read_footer(p.file, p.name) for p in parts]
    template = footers[0].fields
    same = {k: encode_struct([f for f in template if f.id == k]) for k in _FILE_SAME}
    for part, footer in zip(parts, footers):
        for key, expected in same.items():
            if encode_struct([f for f in footer.fields if f.id == key]) != expected:
                raise ValueError(
                    f"{part.name}: written with another schema or writer than {parts[0].name} (footer field {key})"
                )
    sink.write(MAGIC)
    at = len(MAGIC)
    groups: list[list[Field]] = []
    rows = 0
    for part, footer in zip(parts, footers):
        for number in part.groups if part.groups is not None else range(len(footer.row_groups)):
            start, stop = footer.extents[number]
            groups.append(_moved(footer.row_groups[number], at - start, len(groups)))
            rows += footer.rows(number)
            for offset in range(start, stop, COPY_BYTES):
                chunk = part.file.read_at(min(COPY_BYTES, stop - offset), offset)
                sink.write(chunk)
            at += stop - start
    kinds: ThriftList = field_value(template, _FILE_ROW_GROUPS)
    fields = [
        Field(f.id, f.type, ThriftList(kinds.kind, kinds.element_type, groups))
        if f.id == _FILE_ROW_GROUPS
        else copy.deepcopy(f)
        for f in template
    ]
    set_field(fields, _FILE_NUM_ROWS, rows)
    footer_bytes = encode_struct(fields)
    sink.write(footer_bytes)
    sink.write(len(footer_bytes).to_bytes(4, "little"))
    sink.write(MAGIC)
    return rows

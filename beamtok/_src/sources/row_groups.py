"""Find the Parquet row group holding a row, from the file's metadata alone (no scanning)."""

from __future__ import annotations

import bisect
import itertools
from typing import Any, NamedTuple

__all__ = ["RowGroupSeek", "seek_row"]


class RowGroupSeek(NamedTuple):
    """Where row ``row`` lives: its row group (``groups`` when the row is the end of the
    file), the file's row group count, rows to skip inside that group, and the total."""

    group: int
    groups: int
    skip: int
    rows: int


def seek_row(metadata: Any, row: int) -> RowGroupSeek:
    """The row group of ``row`` in a file with this ``pyarrow.parquet.FileMetaData``."""
    ends = list(itertools.accumulate(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)))
    group = bisect.bisect_right(ends, row)
    first = ends[group - 1] if group else 0
    return RowGroupSeek(group, len(ends), row - first, ends[-1] if ends else 0)

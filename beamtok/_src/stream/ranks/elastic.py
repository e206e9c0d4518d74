"""Resume on another world size: one reader's state from the states of all old readers.

Every old reader saves its own state; a restart with another number of readers passes the
list of them all. Each live node merges the old states of its own layer:

- a shard source (``split="shards"``, ``ShardSource.merge``) gathers what the old readers had not read yet: their
  open shards at their cursors, the shards left of their epoch and, for readers an epoch
  behind the furthest, their shares of the epochs in between. These *carried* shards, in
  the order of the epochs' shard orders, are dealt to the new readers round robin (carried
  shard ``k`` to reader ``k mod parts``); a new reader reads its carried shards first, then
  continues with the next epoch split the new way. A partly read shard continues from its
  cursor on exactly one new reader.
- an example split (``split="examples"``, ``ExampleSplitNode.merge``) takes the old state of the reader whose position
  is furthest while nothing before it is unread, and the list of global example numbers the
  old readers took beyond it; the new reader takes every ``parts``-th example from there,
  skipping the listed ones.
- a mix merges each source's states this way; its one sequence of sources continues after
  the last position an old reader filled (``MixSource.merge``, ``beamtok._src.stream.mixing.reading``).
- a stage without a position of its own passes the merge upstream; a shuffle hands each old
  reader's half-emitted window to one new reader, which finishes it first
  (``WindowNode.merge``, which every windowed stage shares); take and enumerate refuse (their counts are per reader).

No example is lost and none repeats: the union of what the new readers yield equals the
union of what the old ones would have yielded. The order differs from the old readers'
(same set, another order) while carried shards remain; with the same number of readers the
resume is the plain one. Document counts and tokens of the old readers add up on new reader
0, so stats summed over readers stay exact.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from beamtok._src.base.errors import StateError
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.state import find_states

__all__ = ["check_readers", "reader_states"]


def check_readers(olds: list[ReaderSplit]) -> None:
    """The old states must be those of every reader of one split, once each."""
    first = olds[0]
    for old in olds:
        if (old.world_size, old.num_workers, old.mode) != (first.world_size, first.num_workers, first.mode):
            raise StateError(
                f"the states come from different splits: {dataclasses.asdict(first)} and {dataclasses.asdict(old)}"
            )
    have = sorted(old.part for old in olds)
    if have != list(range(first.parts)):
        missing = sorted(set(range(first.parts)) - set(have))
        doubled = sorted({p for p in have if have.count(p) > 1})
        raise StateError(
            f"resuming on another world size needs the states of all {first.parts} old readers "
            f"(world_size={first.world_size} x workers={first.num_workers}), once each: "
            + (f"missing readers {missing}" if missing else "")
            + ("; " if missing and doubled else "")
            + (f"readers {doubled} given twice" if doubled else "")
        )


def reader_states(*saved: Any) -> list[dict[str, Any]]:
    """Every beamtok reader state found in ``saved``: iterator states, lists of them, or the
    ``state_dict()`` of each old rank's ``StatefulDataLoader`` (one per DataLoader worker
    inside), ready for ``iter_merged(...)`` or ``to_torch(resume_from=...)``.

    Args:
        *saved: Iterator states, lists of them, or loaders' ``state_dict()``s, in rank order.
    Returns:
        Every reader state found, in the order found.
    """
    return [state for _, state in find_states(saved)]

"""Resume on another world size: one reader's state from the states of all old readers.

Every old reader saves its own state; a restart with another number of readers passes the
list of them all. Each live node merges the old states of its own layer:

- a shard source (``split="shards"``) gathers what the old readers had not read yet: their
  open shards at their cursors, the shards left of their epoch and, for readers an epoch
  behind the furthest, their shares of the epochs in between. These *carried* shards, in
  the order of the epochs' shard orders, are dealt to the new readers round robin (carried
  shard ``k`` to reader ``k mod parts``); a new reader reads its carried shards first, then
  continues with the next epoch split the new way. A partly read shard continues from its
  cursor on exactly one new reader.
- an example split (``split="examples"``) takes the old state of the reader whose position
  is furthest while nothing before it is unread, and the list of global example numbers the
  old readers took beyond it; the new reader takes every ``parts``-th example from there,
  skipping the listed ones.
- a mix merges each source's states this way; its one sequence of sources continues after
  the last position an old reader filled (``MixSource.merge``).
- a stage without a position of its own passes the merge upstream; a shuffle hands each old
  reader's half-emitted window to one new reader, which finishes it first
  (``WindowShuffleNode.merge``); take and enumerate refuse (their counts are per reader).

No example is lost and none repeats: the union of what the new readers yield equals the
union of what the old ones would have yielded. The order differs from the old readers'
(same set, another order) while carried shards remain; with the same number of readers the
resume is the plain one. Document counts and tokens of the old readers add up on new reader
0, so stats summed over readers stay exact.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from beamtok.errors import StateError
from beamtok.stream.split import ReaderSplit

if TYPE_CHECKING:
    from beamtok.stream.source import ShardSource

__all__ = ["merge_example_splits", "merge_shard_sources", "reader_states", "summed_stats"]


def summed_stats(stats: list[dict[str, Any]], new: ReaderSplit) -> dict[str, Any]:
    """All old readers' stats on new reader 0, empty stats on the others."""
    from beamtok.stream.source import StreamStats

    total = StreamStats()
    if new.part == 0:
        for one in stats:
            total.add(StreamStats.from_json(one))
    return total.to_json()


def merge_shard_sources(source: ShardSource, states: list[dict[str, Any]], olds: list[ReaderSplit], new: ReaderSplit) -> dict[str, Any]:
    """The state of ``source`` (reader ``new``) that reads what the old readers left."""
    from beamtok.stream.source import ShardSource

    if new.mode != "shards":
        raise StateError("a shard source splits by examples here: merge the example split, not the source")
    probes = []
    for state, old in zip(states, olds):
        probe = ShardSource(source.shards, source.backend, source.options, old)
        probe.reset(state)
        probes.append(probe)
    last = max(p.epoch for p in probes)
    rank_of = {e: {shard: i for i, shard in enumerate(source.epoch_order(e))} for e in range(min(p.epoch for p in probes), last + 1)}
    carried: list[tuple[int, int, int, dict[str, Any]]] = []  # (epoch, rank in the epoch's order, shard, cursor)

    def carry(epoch: int, shard: int, cursor: dict[str, Any]) -> None:
        if not cursor["done"]:
            carried.append((epoch, rank_of.get(epoch, {}).get(shard, -1), shard, cursor))

    for probe in probes:
        state = probe.state_dict()
        earlier = min(rank_of)  # an old carry came from an earlier epoch: it goes first
        for slot in state.get(ShardSource.CARRY, []):
            carried.append((earlier - 1, -1, slot["shard"], slot["cursor"]))
        for slot in state["slots"]:
            carry(probe.epoch, slot["shard"], slot["cursor"])
        fresh = {"index": 0, "doc": 0, "token": 0, "done": False}
        for shard in probe.order(probe.epoch)[state["position"] :]:
            carry(probe.epoch, shard, fresh)
        for epoch in range(probe.epoch + 1, last + 1):
            for shard in probe.order(epoch):
                carry(epoch, shard, fresh)
    carried.sort(key=lambda item: item[:2])
    mine = [{"shard": shard, "cursor": cursor} for k, (_, _, shard, cursor) in enumerate(carried) if k % new.parts == new.part]
    target = ShardSource(source.shards, source.backend, source.options, new)
    merged: dict[str, Any] = {
        "epoch": last,
        "position": len(target.order(last)),  # this epoch's own order is read: the carry holds the rest
        "slots": [],
        "turn": 0,
        "stats": summed_stats([s["stats"] for s in states], new),
    }
    if mine:
        merged[ShardSource.CARRY] = mine
    return merged


def merge_example_splits(states: list[dict[str, Any]], olds: list[ReaderSplit], new: ReaderSplit) -> dict[str, Any]:
    """The example-split state for reader ``new`` from the old readers' example-split states
    (``{"upstream", "seen", "taken"?}``): a base reader's upstream, and what was taken beyond it."""
    parts = olds[0].parts
    taken_before = sorted({int(i) for s in states for i in s.get("taken", [])})
    taken_set = set(taken_before)
    nexts = []
    for state, old in zip(states, olds):
        i = _first_owned_at_or_after(state["seen"], old.part, parts)
        while i in taken_set:
            i += parts
        nexts.append(i)
    first_unread = min(nexts)
    base = max((s for s in states if s["seen"] <= first_unread), key=lambda s: s["seen"])
    start = base["seen"]
    taken = {i for i in taken_before if i >= start}
    for state, old in zip(states, olds):
        i = _first_owned_at_or_after(start, old.part, parts)
        while i < state["seen"]:
            if i not in taken_set:
                taken.add(i)
            i += parts
    merged = {"upstream": base["upstream"], "seen": start}
    if taken:
        merged["taken"] = sorted(taken)
    return merged


def _first_owned_at_or_after(index: int, part: int, parts: int) -> int:
    return index + (part - index) % parts


def check_readers(olds: list[ReaderSplit]) -> None:
    """The old states must be those of every reader of one split, once each."""
    first = olds[0]
    for old in olds:
        if (old.world_size, old.num_workers, old.mode) != (first.world_size, first.num_workers, first.mode):
            raise StateError(f"the states come from different splits: {dataclasses.asdict(first)} and {dataclasses.asdict(old)}")
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
    inside), ready for ``iter(state_dict=...)`` or ``to_torch(resume_from=...)``."""
    found: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "beamtok_state" in value:
                found.append(value)
                return
            for inner in value.values():
                walk(inner)
        elif isinstance(value, (list, tuple)):
            for inner in value:
                walk(inner)

    walk(saved)
    return found

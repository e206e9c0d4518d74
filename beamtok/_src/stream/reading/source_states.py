"""The states a shard source is put in from outside its own reading: the one just before a
global example (a seek, or a start at an example), and the one this reader takes from the
states of every reader of another split (a resume on another world size)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Protocol

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.production.protocol import ShardBackend
from beamtok._src.sources.urls import Shard
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.reading.stats import StreamStats, summed_stats
from beamtok._src.stream.state import ShardSlotJSON, ShardSourceState

__all__ = ["SourceLayout", "examples_before", "merged_source_state", "state_before_example"]


class SourceLayout(Protocol):
    """What these functions read of a shard source (``ShardSource`` is the one): its shards and
    backend, its reader split and options, its order of each epoch, and its state."""

    @property
    def shards(self) -> Sequence[Shard]:
        """Every shard of the data, in index order."""
        ...

    @property
    def backend(self) -> ShardBackend:
        """What opens a shard and knows its row count."""
        ...

    @property
    def split(self) -> ReaderSplit:
        """This reader's part."""
        ...

    @property
    def interleave(self) -> int:
        """Shards open at once."""
        ...

    @property
    def epochs(self) -> int | None:
        """Epochs read (None: forever)."""
        ...

    @property
    def epoch(self) -> int:
        """The epoch being read."""
        ...

    def order(self, epoch: int) -> list[int]:
        """This reader's shards of ``epoch``, in order."""
        ...

    def epoch_order(self, epoch: int) -> list[int]:
        """Every shard of ``epoch``, in order."""
        ...

    def reset(self, state: ShardSourceState | None) -> None:
        """Put the source in ``state``."""

    def state_dict(self) -> ShardSourceState:
        """The source's state."""
        ...

    def for_reader(self, split: ReaderSplit) -> SourceLayout:
        """A fresh source of the same shards and options for reader ``split``."""
        ...


def state_before_example(source: SourceLayout, example: int) -> ShardSourceState:
    """The state of ``source`` just before its global example ``example``: the very state
    (epoch, position, open shard and cursor) that reading ``example`` examples leaves.

    Args:
        source: A shard source with one open shard, a single reader, and a backend that knows
            every shard's row count (a packed cache).
        example: The global example.
    """
    if source.interleave != 1 or source.split.parts > 1:
        raise ConfigError("start_example works with interleave(1) and a single reader")
    if source.backend.rows(source.shards[0]) is None:
        raise ConfigError("start_example needs the row counts of a packed cache; on the fly, resume from a state_dict")
    rows = [source.backend.rows(shard) or 0 for shard in source.shards]
    stats = StreamStats().to_json()
    if example == 0:  # nothing read: the state of a fresh source
        return {"epoch": 0, "position": 0, "slots": [], "turn": 0, "stats": stats}
    left = example
    epoch = 0
    for epoch in itertools.count() if source.epochs is None else range(source.epochs):
        order = source.order(epoch)
        for position, shard in enumerate(order):
            # reading k examples leaves the shard of the k-th open at its end (done), in
            # its own epoch: the next shard, or epoch, is opened by the next read only
            if left < rows[shard] or (left == rows[shard] and left > 0):
                cursor = source.backend.cursor_at(source.shards[shard], left)
                slot = ShardSlotJSON(shard=shard, cursor=cursor.to_json())
                return {"epoch": epoch, "position": position + 1, "slots": [slot], "turn": 0, "stats": stats}
            left -= rows[shard]
        if sum(rows[s] for s in order) == 0:
            break
    if left == 0:  # exactly the end of the stream
        return {"epoch": epoch, "position": len(source.order(epoch)), "slots": [], "turn": 0, "stats": stats}
    raise ConfigError(f"start_example {example} is past the end of the stream")


def examples_before(source: SourceLayout, state: ShardSourceState, rows: list[int]) -> int:
    """How many examples a single reader of ``source`` has passed since the stream's start
    when it is in ``state``.

    Args:
        source: The shard source.
        state: Its state (one open shard at most).
        rows: Each shard's row count.
    """
    number = sum(rows[i] for epoch in range(state["epoch"]) for i in source.order(epoch))
    order = source.order(state["epoch"])
    opened = order[: state["position"]]
    for slot in state["slots"]:  # the open shard counts its cursor (a finished one: all its rows)
        opened = order[: state["position"] - 1]
        number += slot["cursor"]["index"]
    return number + sum(rows[i] for i in opened)


def merged_source_state(
    source: SourceLayout, states: list[ShardSourceState], olds: list[ReaderSplit], new: ReaderSplit
) -> ShardSourceState:
    """The state of ``source`` (reader ``new``) that reads what the old readers left."""
    if new.mode != "shards":
        raise StateError("a shard source splits by examples here: merge the example split, not the source")
    probes = []
    for state, old in zip(states, olds):
        probe = source.for_reader(old)
        probe.reset(state)
        probes.append(probe)
    last = max(p.epoch for p in probes)
    rank_of = {
        e: {shard: i for i, shard in enumerate(source.epoch_order(e))}
        for e in range(min(p.epoch for p in probes), last + 1)
    }
    carried: list[tuple[int, int, int, dict[str, Any]]] = []  # (epoch, rank in the epoch's order, shard, cursor)

    def carry(epoch: int, shard: int, cursor: dict[str, Any]) -> None:
        if not cursor["done"]:
            carried.append((epoch, rank_of.get(epoch, {}).get(shard, -1), shard, cursor))

    for probe in probes:
        probed = probe.state_dict()
        earlier = min(rank_of)  # an old carry came from an earlier epoch: it goes first
        for slot in probed.get("carry", []):
            carried.append((earlier - 1, -1, slot["shard"], slot["cursor"]))
        for slot in probed["slots"]:
            carry(probe.epoch, slot["shard"], slot["cursor"])
        fresh = {"index": 0, "doc": 0, "token": 0, "done": False}
        for shard in probe.order(probe.epoch)[probed["position"] :]:
            carry(probe.epoch, shard, fresh)
        for epoch in range(probe.epoch + 1, last + 1):
            for shard in probe.order(epoch):
                carry(epoch, shard, fresh)
    carried.sort(key=lambda item: item[:2])
    mine = [
        ShardSlotJSON(shard=shard, cursor=cursor)
        for k, (_, _, shard, cursor) in enumerate(carried)
        if k % new.parts == new.part
    ]
    target = source.for_reader(new)
    merged = ShardSourceState(
        epoch=last,
        position=len(target.order(last)),  # this epoch's own order is read: the carry holds the rest
        slots=[],
        turn=0,
        stats=summed_stats([s["stats"] for s in states], new.part),
    )
    if mine:
        merged["carry"] = mine
    return merged

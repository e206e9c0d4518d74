"""ShardSource: the root of every stream.

It orders the shards of each epoch (optionally shuffled with a seed), keeps the ones this
reader owns (by rank and DataLoader worker), keeps ``interleave`` of them open and takes one
example from each in turn, reading them through a :class:`ShardBackend`. Its state holds the
epoch, the position in that epoch's order and the cursor of each open shard, so restoring
seeks instead of replaying. It owns that layout, including the state just before a global
example (where the backend knows row counts). Nothing is opened, read or started before the
first ``next()``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.validate import check_int
from beamtok._src.production.protocol import ShardBackend
from beamtok._src.shards.items import Produced, ShardCursor
from beamtok._src.shards.spans import SpanReader, Taken, in_turns
from beamtok._src.sources.urls import Shard
from beamtok._src.stream.node import RootSource
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.reading.shard_order import ShardOptions, ShardOrder
from beamtok._src.stream.reading.source_states import examples_before, merged_source_state, state_before_example
from beamtok._src.stream.reading.source_words import shard_source_words
from beamtok._src.stream.reading.stats import StreamStats
from beamtok._src.stream.state import ShardSlotJSON, ShardSourceState, check_keys, copy_state

__all__ = ["ShardSource"]

PREFETCH_SHARDS = 4


class _Slot:
    """An open shard: its cursor, and its examples once the first one is asked for."""

    __slots__ = ("cursor", "examples", "shard")

    def __init__(self, shard: int, cursor: ShardCursor) -> None:
        self.shard = shard
        self.cursor = cursor
        self.examples: Iterator[Produced] | None = None  # a SpanReader where the backend decodes blocks


class ShardSource(RootSource[ShardSourceState]):
    """Yields the examples of the shards this reader owns, epoch after epoch."""

    def __init__(self, shards: list[Shard], backend: ShardBackend, options: ShardOptions, split: ReaderSplit) -> None:
        """A source at the beginning of its first epoch.

        Args:
            shards: Every shard of the data, in index order (each reader takes its own).
            backend: What opens a shard and reads its examples.
            options: Epochs, shard shuffle seed, interleave.
            split: This reader's part.

        Raises:
            ConfigError: No shards, or fewer shards than readers when splitting by shards.
        """
        if not shards:
            raise ConfigError("the dataset has no shards")
        if split.mode == "shards" and len(shards) < split.parts:
            raise ConfigError(
                f"{len(shards)} shard(s) cannot be split over {split.parts} readers "
                f"(world_size={split.world_size} x workers={split.num_workers}); "
                "use more shards or shard_by_rank(..., split='examples')"
            )
        self.shards = shards
        self.backend = backend
        self.options = options
        self.epochs = options.epochs
        self.shard_order = ShardOrder(len(shards), options.shuffle_seed, split)
        self.interleave = options.interleave
        self.split = split
        self.reset(None)

    @classmethod
    def state_lines(cls, state: Any, shards: Sequence[Shard] | None = None, indent: str = "") -> list[str]:
        """A saved state of a shard source in words.

        Args:
            state: The source's part of a saved state.
            shards: When given, shards are named by file and cursors by what they count in it.
            indent: Put before every line.
        """
        return shard_source_words(state, shards, indent)

    def for_reader(self, split: ReaderSplit) -> ShardSource:
        """A fresh source of the same shards, backend and options for reader ``split``.

        Args:
            split: The reader.
        """
        return ShardSource(self.shards, self.backend, self.options, split)

    def epoch_order(self, epoch: int) -> list[int]:
        """All shard indices of ``epoch``, in the order readers share them out."""
        return self.shard_order.epoch(epoch)

    def order(self, epoch: int) -> list[int]:
        """Shard indices this reader takes in ``epoch``, in order."""
        return self.shard_order.owned(epoch)

    def reset(self, state: ShardSourceState | None) -> None:
        """Start again from a saved state, or from the beginning of the first epoch.

        Args:
            state: What ``state_dict`` gave, or None.

        Raises:
            StateError: The state is malformed or names shards this source does not have.
        """
        self.stats = StreamStats()
        self._epoch = 0
        self._position = 0
        self._slots: list[_Slot] = []
        self._carry: list[_Slot] = []
        self._turn = 0
        self._hinted = False
        self._yielded_in_epoch = False
        if state is not None:
            self._restore(copy_state(state))
        self._order = self.order(self._epoch)

    def _restore(self, state: Any) -> None:
        check_keys(state, ShardSourceState, "shard source")
        self._epoch = check_int(state["epoch"], "epoch", "shard source")
        if self.epochs is not None and self._epoch >= self.epochs:
            raise StateError(f"shard source: epoch {self._epoch} is past the last epoch ({self.epochs})")
        n_owned = len(self.order(self._epoch))
        self._position = check_int(state["position"], "position", "shard source")
        if self._position > n_owned:
            raise StateError(f"shard source: position {self._position} is past this reader's {n_owned} shards")
        slots = state["slots"]
        if not isinstance(slots, list) or len(slots) > self.interleave:
            raise StateError(f"shard source: slots must be a list of at most {self.interleave} open shards")
        self._slots = [self._slot_of(slot) for slot in slots]
        carry = state.get("carry", [])
        if not isinstance(carry, list):
            raise StateError("shard source: carry must be a list of shards")
        self._carry = [self._slot_of(slot) for slot in carry]
        self._turn = check_int(state["turn"], "turn", "shard source")
        if self._slots and self._turn >= len(self._slots):
            raise StateError(f"shard source: turn {self._turn} is out of range")
        self.stats = StreamStats.from_json(state["stats"])
        self._yielded_in_epoch = True  # not known; only an epoch seen whole from its start can prove emptiness

    def _slot_of(self, slot: Any) -> _Slot:
        check_keys(slot, ShardSlotJSON, "shard source slot")
        index = check_int(slot["shard"], "shard", "shard source slot")
        if index >= len(self.shards):
            raise StateError(f"shard source: shard {index} does not exist (the dataset has {len(self.shards)})")
        return _Slot(index, ShardCursor.from_json(slot["cursor"]))

    @property
    def epoch(self) -> int:
        """The epoch of the last example handed out (0 before the first)."""
        return self._epoch

    def stats_json(self) -> dict[str, Any]:
        """What reached the consumer's side of the source, and the epoch."""
        return {**self.stats.to_json(), "epoch": self._epoch}

    def state_dict(self) -> ShardSourceState:
        state = ShardSourceState(
            epoch=self._epoch,
            position=self._position,
            slots=[ShardSlotJSON(shard=s.shard, cursor=s.cursor.to_json()) for s in self._slots],
            turn=self._turn,
            stats=self.stats.to_json(),
        )
        if self._carry:
            state["carry"] = [ShardSlotJSON(shard=s.shard, cursor=s.cursor.to_json()) for s in self._carry]
        return state

    def merge(self, states: list[ShardSourceState], olds: list[ReaderSplit], new: ReaderSplit) -> ShardSourceState:
        """This reader's state from the states of all readers of another split (see
        ``beamtok._src.stream.ranks.elastic``).

        Args:
            states: Every old reader's source state, in the order of ``olds``.
            olds: The old readers' splits.
            new: This reader's split.
        """
        return merged_source_state(self, states, olds, new)

    def state_at(self, example: int) -> ShardSourceState:
        """The state just before global example ``example`` of this source, the very state
        (epoch, position, open shard and cursor) that reading ``example`` examples leaves (a
        seek: needs a backend that knows row counts, one open shard and a single reader)."""
        return state_before_example(self, example)

    def finished(self) -> bool:
        """Whether the last epoch has been read to its end (never, without a last epoch)."""
        return (
            self.epochs is not None
            and self._epoch + 1 >= self.epochs
            and not self._slots
            and not self._carry
            and self._position >= len(self.order(self._epoch))
        )

    def can_seek(self) -> bool:
        """Whether :meth:`seek` can move without reading: one open shard, a single reader, and
        a backend that knows every shard's row count (a packed cache)."""
        return (
            self.interleave == 1
            and self.split.parts == 1
            and not self._carry
            and self.backend.rows(self.shards[0]) is not None
        )

    def seek(self, items: int) -> int:
        """Move past examples without reading them (see ``can_seek``); the counts keep only
        what was handed out.

        Args:
            items: How many examples to pass.

        Returns:
            How many were passed (fewer at the end of the last epoch).
        """
        rows = [self.backend.rows(shard) or 0 for shard in self.shards]
        here = examples_before(self, self.state_dict(), rows)
        target = here + items
        if self.epochs is not None:
            target = min(target, sum(rows[i] for epoch in range(self.epochs) for i in self.order(epoch)))
        if target == here:
            return 0
        state = self.state_at(target)
        state["stats"] = self.stats.to_json()
        self.close()
        self.reset(state)
        return target - here

    def __iter__(self) -> ShardSource:
        return self

    def __next__(self) -> dict[str, Any]:
        if not self._hinted:  # the first next(): open restored shards, then start what comes after
            self._hint()
        while True:
            if not self._slots and not self._fill():
                raise StopIteration
            slot = self._slots[self._turn]
            if slot.examples is None:
                self._open_slot(slot)
            assert slot.examples is not None
            produced = next(slot.examples, None)
            if produced is None:
                self._replace(self._turn)
                continue
            slot.cursor = produced.cursor
            self.stats.record(produced)
            if produced.example is None:
                continue
            self._turn = (self._turn + 1) % len(self._slots)
            self._yielded_in_epoch = True
            return produced.example

    def next_rows(self, limit: int) -> list[Taken] | None:
        """The next ``limit`` examples (fewer at the end) as pieces of decoded row blocks:
        what ``limit`` calls of ``next()`` would return, with the same cursors, turn and
        counts, without a dict per example. Where several open shards take turns, the rows
        each block at hand holds are taken in rounds and laid out in turn order column-wise
        (``in_turns``); a shard whose block is spent gives its turn's row alone, as
        ``next()`` would. None when the backend does not decode blocks."""
        if not self.backend.has_spans:
            return None
        if not self._hinted:
            self._hint()
        pieces: list[Taken] = []
        need = limit
        while need > 0:
            if not self._slots and not self._fill():
                break
            slots = self._slots
            turns = len(slots)
            if turns > 1 and need > 1:
                ready = min(slot.examples.ready() if isinstance(slot.examples, SpanReader) else 0 for slot in slots)
                if ready:
                    rows = min(need, turns * ready)
                    pieces.append(self._take_round(rows))
                    need -= rows
                    continue
            turn = self._turn
            slot = slots[turn]
            if slot.examples is None:
                self._open_slot(slot)
            assert isinstance(slot.examples, SpanReader)
            taken = slot.examples.take(need if turns == 1 else 1)
            if taken is None:
                self._replace(turn)
                continue
            slot.cursor = taken.cursor
            self.stats.record_taken(taken)
            if taken.rows:
                pieces.append(taken)
                need -= taken.rows
                self._turn = (turn + 1) % turns
                self._yielded_in_epoch = True
        return pieces

    def _take_round(self, rows: int) -> Taken:
        """``rows`` rows from the open shards in turns, starting at the shard whose turn it
        is; every shard's block at hand holds its share."""
        turns = len(self._slots)
        first = self._turn
        pieces = []
        for i in range(min(rows, turns)):
            slot = self._slots[(first + i) % turns]
            assert isinstance(slot.examples, SpanReader)
            share = (rows - i + turns - 1) // turns  # the first rows % turns shards take one more
            taken = slot.examples.take(share)
            assert taken is not None and taken.rows == share
            slot.cursor = taken.cursor
            self.stats.record_taken(taken)
            pieces.append(taken)
        self._turn = (first + rows) % turns
        self._yielded_in_epoch = True
        return in_turns(pieces)

    def _open_slot(self, slot: _Slot) -> None:
        shard = self.shards[slot.shard]
        spans = self.backend.open_spans(shard, slot.cursor) if self.backend.has_spans else None
        slot.examples = SpanReader(spans) if spans is not None else self.backend.open(shard, slot.cursor)

    def close(self) -> None:
        """Stop the backend's worker processes and helper threads, if it has any; open
        shards are closed and would reopen at their cursors."""
        for slot in self._slots:
            close = getattr(slot.examples, "close", None)
            if close is not None:
                close()
            slot.examples = None
        self._hinted = False
        self.backend.close()

    def _hint(self) -> None:
        """Open the slots' shards, then tell the backend which shards come next (worker
        processes start them early). Open first: a prefetch must not take the worker an open
        shard needs."""
        self._hinted = True
        for slot in self._slots:
            if slot.examples is None:
                self._open_slot(slot)
        carried = [(self.shards[c.shard], c.cursor) for c in self._carry[:PREFETCH_SHARDS]]
        upcoming = self._order[self._position : self._position + PREFETCH_SHARDS - len(carried)]
        self.backend.prefetch(carried + [(self.shards[i], ShardCursor()) for i in upcoming])

    def _open(self) -> _Slot | None:
        if self._carry:
            return self._carry.pop(0)
        if self._position >= len(self._order):
            return None
        index = self._order[self._position]
        self._position += 1
        return _Slot(index, ShardCursor())

    def _fill(self) -> bool:
        """Open shards into empty slots, moving to the next epoch when this one is spent."""
        while True:
            while len(self._slots) < self.interleave:
                slot = self._open()
                if slot is None:
                    break
                self._slots.append(slot)
            if self._slots:
                self._turn = 0
                self._hint()
                return True
            if self.epochs is not None and self._epoch + 1 >= self.epochs:
                return False
            if not self._yielded_in_epoch:  # a whole epoch without an example: repeating cannot help
                return False
            self._yielded_in_epoch = False
            self._epoch += 1
            self._position = 0
            self._order = self.order(self._epoch)

    def _replace(self, i: int) -> None:
        """A shard ran out: the next shard of the order takes its slot, or the slot closes."""
        slot = self._open()
        if slot is not None:
            self._slots[i] = slot
            self._hint()
            return
        del self._slots[i]
        if self._slots:
            self._turn = i % len(self._slots)

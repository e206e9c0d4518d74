"""What the reading mix and the seeking mix share: the mixing plan with the weight changes
made while training, and the global position a reader fills next.

:class:`~beamtok._src.stream.mixing.reading.MixSource` reads its sources; :class:`~beamtok._src.stream.mixing.seeking.SeekingMix`
computes which example of which source each position takes and seeks to it. Both are this
class's children, and both ask :mod:`beamtok._src.stream.mixing.rule` where the stream stops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.stream.mixing.mix_plan import MixPlan, changes_of
from beamtok._src.stream.node import RootSource, S

__all__ = ["MIX_KIND", "SEEKING_MIX_KIND", "MixBase", "mix_kind"]

MIX_KIND: Final = "mix"  # the state of a mix read source by source (reading.py)
SEEKING_MIX_KIND: Final = "seeking_mix"  # the state of a mix of packed caches read by row number (seeking.py)


def mix_kind(state: Any) -> str:
    """The kind a mix state declares (each mix reads the other's state too), or StateError.

    Args:
        state: A mix's part of a saved state.
    """
    kind = state.get("kind") if isinstance(state, dict) else None
    if kind not in (MIX_KIND, SEEKING_MIX_KIND):
        raise StateError(
            f"mix: the state's kind is {kind!r}, not {MIX_KIND!r} or {SEEKING_MIX_KIND!r} (a state of another node?)"
        )
    return str(kind)


class MixBase(RootSource[S]):
    """A mix's plan (declared, and with the changes made while training), its position and
    stop flag. Children set ``declared``, ``part``, ``parts`` and ``example_parts``, then
    call ``_start_plan()``."""

    CHANGES = "weight_changes"  # [start_example, weights] set while training; only when there are any
    CARRIED = "stats"  # counts carried from the other mix's state (the reading mix keeps its sources' own); only then

    declared: MixPlan
    part: int  # readers that split by shards share the positions: this one fills part, part + parts, ...
    parts: int
    example_parts: int  # readers taking turns downstream (an example split)

    def _start_plan(self) -> None:
        self.plan = self.declared
        self._index = self.part
        self._stopped = False
        self._changes: list[tuple[int, tuple[float, ...]]] = []

    @classmethod
    def state_lines(cls, state: Any, indent: str = "") -> list[str]:
        """A saved mix state's own position in words (its sources' states are described by
        their own kinds)."""
        if not isinstance(state, dict) or state.get("kind") not in (MIX_KIND, SEEKING_MIX_KIND):
            return [f"{indent}mix: unreadable ({state!r})"]
        lines = [
            f"{indent}mix: {state.get('index')} examples decided so far (the global index), stopped: {state.get('stopped')}"
        ]
        for change in state.get(cls.CHANGES) or []:
            if isinstance(change, list) and len(change) == 2:
                lines.append(f"{indent}  weights set while training: {change[1]} from global example {change[0]:,}")
        return lines

    def set_weights(self, weights: Sequence[float]) -> int:
        """Mix by ``weights`` from the first block boundary at or after the first global
        position no reader has taken (readers in step agree on it); returns that position.
        Kept in the state, so a resume replays it."""
        if self.example_parts > 1:  # every reader reads the mixed stream and keeps its turns: round up to a turn
            first_untaken = ((self._index - 1) // self.example_parts + 1) * self.example_parts
        else:
            first_untaken = self._index - self.part  # readers in step: every position before it is taken, none after
        start = -(-first_untaken // self.plan.block_size) * self.plan.block_size
        weights = tuple(weights)
        changes = [c for c in self._changes if c[0] != start] + [(start, weights)]
        try:
            self._set_changes(changes_of([[s, list(ws)] for s, ws in changes], len(self.declared.schedule[0][1])))
        except StateError as e:
            raise ConfigError(str(e).replace("mix: weight_changes: ", "set_weights: ")) from None
        return start

    def _set_changes(self, changes: list[tuple[int, tuple[float, ...]]]) -> None:
        try:
            plan = self.declared.with_changes(changes)
        except ConfigError as e:
            raise StateError(f"mix: weight_changes: {e}") from None
        self._changes, self.plan = (
            sorted(changes),
            plan,
        )  # a change starts past every position taken: nothing taken moves

    def _changes_json(self) -> list[list[Any]]:
        return [[start, list(ws)] for start, ws in self._changes]

    def weights_now(self) -> tuple[float, ...]:
        """The weights of the block holding this reader's next position."""
        return self.plan.weights_at(self._index // self.plan.block_size)

    def state_at(self, example: int) -> S:
        raise ConfigError("start_example does not apply to a mix; resume from a state_dict")

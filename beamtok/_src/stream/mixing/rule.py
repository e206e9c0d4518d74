"""The one rule of a mix: where its stream stops, which positions are passed over, and when
drawing a source is an error. The reading mix (:mod:`beamtok._src.stream.mixing.mix_plan`) and the seeking
mix (:mod:`beamtok._src.stream.mixing.seeking`) both ask it; they differ only in how they know what it
takes.

The rule is asked about positions of one block, in order: each position's source, whether
that source is *exhausted* there (drawn at or past its last example), whether the draw is
*past its first epoch*, and, for every source, from which position it is *spent* (drawn past
its last example) and from which it has been drawn past its first epoch
(:class:`SourceStatus`). The seeking mix computes all of these from the sources' lengths; the
reading mix finds them by reading (a source raising ``StopIteration`` is exhausted, one whose
epoch moved past 0 is past its first) and asks about one position at a time.

- without repetition caps, the stream stops at its first exhausted position (a source that
  repeats forever is exhausted only when it has no example at all: an error, unless the mix
  stops with its first exhausted source);
- with caps, an exhausted position is passed over, and the stream stops at the first
  exhausted position from which every source that can still be drawn (weight in this stage
  or a later one) is spent;
- ``all_exhausted``: the stream stops at the first position past its source's first epoch
  from which every source weighted in the block has been drawn past its first epoch.

A position neither exhausted nor past its first epoch never stops the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from beamtok._src.stream.mixing.mix_plan import MixPlan

__all__ = ["NEVER", "SourceStatus", "empty_source_at", "stop_offset"]

NEVER = np.iinfo(np.int64).max  # a position that never comes


@dataclass(frozen=True)
class SourceStatus:
    """What a mix knows of each source, as positions (``NEVER``: not known to come)."""

    spent_at: np.ndarray  # from this position on, the source is drawn past its last example
    second_epoch_at: np.ndarray  # from this position on, it has been drawn past its first epoch
    empty_forever: np.ndarray  # bool: it repeats forever, so an exhausted draw means it has no example


def stop_offset(
    plan: MixPlan,
    block: int,
    positions: np.ndarray,
    sources: np.ndarray,
    exhausted: np.ndarray,
    past_first: np.ndarray,
    status: SourceStatus,
) -> int | None:
    """Where among ``positions`` (of ``block``, in order) the mixed stream stops, or None when
    it runs on past them. Exhausted positions before the stop are passed over."""
    stops = []
    if exhausted.any():
        empty = exhausted & status.empty_forever[sources]
        if plan.max_epochs is None or (empty.any() and plan.stop != "first_exhausted"):
            stops.append(int(np.argmax(exhausted if plan.max_epochs is None else empty)))
        if plan.max_epochs is not None:
            spent_from = _all_spent_from(plan, block, status)
            if spent_from is not None:
                spent = np.flatnonzero(exhausted & (positions >= spent_from))
                if len(spent):
                    stops.append(int(spent[0]))
    if plan.stop == "all_exhausted" and past_first.any():
        firsts = [int(status.second_epoch_at[i]) for i, w in enumerate(plan.weights_at(block)) if w > 0]
        if all(f != NEVER for f in firsts):
            done = np.flatnonzero(past_first & (positions >= max(firsts)))
            if len(done):
                stops.append(int(done[0]))
    return min(stops) if stops else None


def empty_source_at(plan: MixPlan, source: int, exhausted: bool, status: SourceStatus) -> bool:
    """Whether the stream stopping at a draw of ``source`` is the error of a source that
    repeats forever yet yields nothing (a mix that stops at its first exhausted source just
    stops there)."""
    return exhausted and bool(status.empty_forever[source]) and plan.stop != "first_exhausted"


def _all_spent_from(plan: MixPlan, block: int, status: SourceStatus) -> int | None:
    """The position from which every source that can still be drawn from ``block`` on is
    spent, or None when one is not capped or not known to be spent."""
    caps = plan.max_epochs
    assert caps is not None
    live = plan.drawn_from(block)
    if any(caps[i] is None for i in live):
        return None
    last = max(int(status.spent_at[i]) for i in live)
    return None if last == NEVER else last

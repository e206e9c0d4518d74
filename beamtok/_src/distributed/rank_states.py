"""The states of every rank of a run, as one checkpointable value.

A restart on another world size needs the state of every old reader (``beamtok.reader_states``),
so what a checkpoint keeps for the data is the list of all ranks' states, in rank order, not
each rank's own. :func:`pack_rank_states` turns that list into a small dict of plain values
(the states compressed as one JSON blob); :func:`unpack_rank_states` checks it and gives the list
back, refusing by name a value that is not beamtok's, a newer format, a rank missing or a rank
given twice.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import orjson

from beamtok._src.base.errors import StateError

__all__ = ["RANK_STATES_FORMAT", "RANK_STATES_VERSION", "RankStates", "pack_rank_states", "unpack_rank_states"]

RANK_STATES_FORMAT = "beamtok.rank_states"
RANK_STATES_VERSION = 1


@dataclass(frozen=True)
class RankStates:
    """What each rank of a run saved, in rank order: ``entries[r]`` is rank ``r``'s, a dict with
    its ``rank``, its DataLoader ``num_workers``, its ``loader`` state and ``replica``: true
    where every rank reads the whole stream and keeps its own share of it (``balance_ranks``)."""

    world_size: int
    entries: tuple[dict[str, Any], ...]

    @property
    def loader_states(self) -> list[Any]:
        """The loader states a resume on another layout gathers its readers' states from: every
        rank's, or rank 0's alone where the ranks are replicas (any one holds the position)."""
        if all(entry.get("replica") for entry in self.entries):
            return [self.entries[0]["loader"]]
        return [entry["loader"] for entry in self.entries]

    def same_layout(self, world_size: int, num_workers: int) -> bool:
        """Whether a run of ``world_size`` ranks with ``num_workers`` loader workers each reads
        exactly as the saved one did (each rank then resumes its own state, exactly)."""
        return self.world_size == world_size and all(entry["num_workers"] == num_workers for entry in self.entries)


def pack_rank_states(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Every rank's entry (gathered in rank order) as one value for a checkpoint.

    Args:
        entries: Each rank's entry, in rank order: its ``rank``, ``num_workers``, ``loader``
            state and ``replica`` flag.
    """
    _check_entries(entries, len(entries), "the gathered states")
    blob = zlib.compress(orjson.dumps(entries), 6)
    return {"format": RANK_STATES_FORMAT, "version": RANK_STATES_VERSION, "world_size": len(entries), "states": blob}


def unpack_rank_states(value: Any, where: str = "the checkpoint") -> RankStates:
    """The entries packed by :func:`pack_rank_states`, checked.

    Args:
        value: What the checkpoint holds under the loader's key.
        where: How errors name the checkpoint.
    """
    if not isinstance(value, dict) or value.get("format") != RANK_STATES_FORMAT:
        found = sorted(value) if isinstance(value, dict) else type(value).__name__
        raise StateError(
            f"{where} holds no beamtok rank states under this key (found {found}): was it saved by another loader?"
        )
    version = value.get("version")
    if not isinstance(version, int) or version > RANK_STATES_VERSION:
        raise StateError(
            f"{where}: rank states of format version {version!r}; this beamtok reads up to {RANK_STATES_VERSION}: upgrade beamtok"
        )
    blob = value.get("states")
    try:
        entries = orjson.loads(zlib.decompress(bytes(blob)))  # type: ignore[arg-type]
    except (TypeError, ValueError, zlib.error) as error:
        raise StateError(f"{where}: the beamtok rank states are damaged ({error})") from None
    world_size = value.get("world_size")
    if not isinstance(world_size, int) or world_size < 1:
        raise StateError(f"{where}: the beamtok rank states name no world size ({world_size!r})")
    _check_entries(entries, world_size, where)
    return RankStates(world_size, tuple(entries))


def _check_entries(entries: Any, world_size: int, where: str) -> None:
    if not isinstance(entries, list):
        raise StateError(f"{where}: the beamtok rank states are not a list of ranks")
    ranks = [entry.get("rank") if isinstance(entry, dict) else None for entry in entries]
    for entry in entries:
        if not isinstance(entry, dict) or not {"rank", "num_workers", "loader"} <= set(entry):
            raise StateError(f"{where}: a rank's entry lacks its rank, num_workers or loader state")
    missing = sorted(set(range(world_size)) - {r for r in ranks if isinstance(r, int)})
    doubled = sorted({r for r in ranks if isinstance(r, int) and ranks.count(r) > 1})
    if missing or doubled or len(entries) != world_size or ranks != list(range(world_size)):
        problems = ([f"missing ranks {missing}"] if missing else []) + (
            [f"ranks {doubled} given twice"] if doubled else []
        )
        raise StateError(
            f"{where}: the beamtok states must be those of all {world_size} ranks of the saved run, once each, in rank order; "
            + ("; ".join(problems) or f"found ranks {ranks}")
            + " (two processes that took the same rank, or a state gathered from part of the job)"
        )

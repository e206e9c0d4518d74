"""Which packer a spec asks for: the registry of packing modes (one place that knows them all)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from beamtok.transforms.best_fit import BestFitPacker
from beamtok.transforms.pack import (
    ConcatChunker,
    FirstFitPacker,
    GreedyPacker,
    Packer,
    PadTruncate,
    SlidingWindow,
    WholeDocument,
)
from beamtok.transforms.power_of_two import PowerOfTwoRows

if TYPE_CHECKING:
    from beamtok.spec import PackSpec

__all__ = ["PACKERS", "make_packer"]

PACKERS: dict[str, Callable[[PackSpec], Packer]] = {
    "none": lambda p: WholeDocument(),
    "concat": lambda p: ConcatChunker(p.seq_len or 0, p.pad_id, p.remainder),
    "pad": lambda p: PadTruncate(p.seq_len or 0, p.pad_id),
    "window": lambda p: SlidingWindow(p.seq_len or 0, p.stride or 0),
    "greedy": lambda p: GreedyPacker(p.seq_len or 0, p.pad_id),
    "first_fit": lambda p: FirstFitPacker(p.seq_len or 0, p.pad_id, p.window or 0),
    "best_fit": lambda p: BestFitPacker(p.seq_len or 0, p.pad_id, p.window or 0, p.long_docs or "split", p.bos_id),
    "power_of_two": lambda p: PowerOfTwoRows(p.seq_len or 0, p.window or 1),
}


def make_packer(pack: PackSpec | None) -> Packer:
    """The packer a spec asks for (one whole document a row when it asks for none)."""
    return WholeDocument() if pack is None else PACKERS[pack.mode](pack)

"""The global-shuffle root: every row of a packed cache once per epoch, in a keyed
permutation over the whole cache (or within windows of rows); its live source is
:class:`~beamtok._src.stream.global_order.shuffle_source.GlobalShuffleSource`. Readers take every k-th
position of the one order, so it splits the data between readers itself."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.sizes import default_group_rows
from beamtok._src.base.validate import check_int, check_optional_int
from beamtok._src.core.spec import Spec
from beamtok._src.production.decode_pool import DecodePool
from beamtok._src.production.protocol import RowSource
from beamtok._src.sources.urls import Shard
from beamtok._src.stream.global_order.order import GlobalOrder
from beamtok._src.stream.global_order.shard_units import ShardUnits
from beamtok._src.stream.global_order.shuffle_source import GlobalShuffleSource
from beamtok._src.stream.node import Node
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.reading.shard_order import ShardOptions
from beamtok._src.stream.reading.source_rows import ShuffledRows
from beamtok._src.stream.roots.base import RootPlan
from beamtok._src.stream.roots.shards import ShardsRoot

__all__ = ["GlobalShuffleRoot"]


@dataclass(frozen=True)
class GlobalShuffleRoot(RootPlan):
    """A packed cache's rows (``base``: its shard root) in the permutation keyed by ``seed``."""

    KIND = "global shuffle"

    base: ShardsRoot
    seed: int = 0
    window: int | None = None
    local_copy: bool | str | None = None  # how rows are read, not which: in no fingerprint
    spread: int | None = None  # units per window (see beamtok._src.stream.global_order.shuffle_source)
    unit_rows: int | None = None  # rows per unit with spread (default: a default row group's)

    def __post_init__(self) -> None:
        check_int(self.seed, "seed")
        check_optional_int(self.window, "window", minimum=1)
        check_optional_int(self.spread, "spread", minimum=1)
        check_optional_int(self.unit_rows, "unit_rows", minimum=1)
        if self.spread is not None and self.window is not None:
            raise ConfigError("global_shuffle(): window= and spread= are two kinds of window; pass one")
        if self.unit_rows is not None and self.spread is None:
            raise ConfigError("global_shuffle(): unit_rows= sizes the units of spread=; pass spread too")
        if self.local_copy is not None and not isinstance(self.local_copy, (bool, str)):
            raise ConfigError(f"local_copy must be True, False, None or a directory, not {self.local_copy!r}")
        o = self.base.options
        if o.shuffle_seed is not None or o.interleave != 1 or o.workers:
            raise ConfigError("global_shuffle() replaces shuffle_shards(), interleave() and parallel(); drop them")
        if self.base.origin.row_access(self.base.spec) is None:
            raise ConfigError(
                "global_shuffle() needs random access to rows: a packed cache (Dataset.from_cache), not repacked"
            )

    @property
    def spec(self) -> Spec:
        return self.base.spec

    @property
    def options(self) -> ShardOptions:
        return self.base.options

    @property
    def seekable(self) -> bool:
        """Always: a global shuffle reads rows by number (a mix seeks it, see ``source_rows``)."""
        return True

    def source(self, split: ReaderSplit) -> GlobalShuffleSource:
        """The live source for reader ``split`` (a mix's child: the whole order when the mix
        splits by examples itself)."""
        return self.build(split if split.mode == "shards" else ReaderSplit())[0]

    def source_rows(self, pool: DecodePool) -> ShuffledRows:
        """Its examples by number (one reader, epoch after epoch), decoded into ``pool``."""
        rows = self.base.origin.row_access(self.base.spec, pool=pool)
        assert rows is not None  # checked when the plan was made
        return ShuffledRows(rows, self.order(rows), self.base.options.epochs)

    def order(self, rows: RowSource) -> GlobalOrder:
        """Epoch 0's permutation of ``rows`` (other epochs differ by the epoch alone)."""
        spread = self.spread_units()
        if spread is None:
            return GlobalOrder(rows.total, self.seed, 0, self.window)
        return GlobalOrder(rows.total, self.seed, 0, None, spread[0], ShardUnits(rows.shard_rows, spread[1]))

    @property
    def shards(self) -> tuple[Shard, ...]:
        return self.base.shards

    @property
    def cached(self) -> bool:
        return self.base.cached

    @property
    def spec_fingerprint(self) -> str:
        return self.base.spec_fingerprint

    def build(self, split: ReaderSplit) -> tuple[GlobalShuffleSource, Node]:
        rows = self.base.origin.row_access(self.base.spec, self.local_copy)
        assert rows is not None  # checked when the plan was made
        source = GlobalShuffleSource(
            rows,
            seed=self.seed,
            window=self.window,
            epochs=self.base.options.epochs,
            split=split,
            spread=self.spread_units(),
        )
        return source, source

    def spread_units(self) -> tuple[int, int] | None:
        """(units per window, rows per unit) with spread, else None. Units default to the rows
        of a row group a build writes by default for this packing."""
        if self.spread is None:
            return None
        seq_len = self.base.spec.pack.seq_len if self.base.spec.pack is not None else None
        return self.spread, self.unit_rows or default_group_rows(seq_len)

    def _options_json(self, reader: ReaderSplit) -> dict[str, Any]:
        shuffle: dict[str, Any] = {"seed": self.seed, "window": self.window}
        spread = self.spread_units()
        if spread is not None:  # only when set: the fingerprints of other shuffles stay as they were
            shuffle["spread"], shuffle["unit_rows"] = spread
            shuffle["units"] = (
                "within shards"  # units cut inside shard bounds (ShardUnits): states of the older order, without this key, are refused
            )
        return {**self.base.options.to_json(reader), "global_shuffle": shuffle}

    def fingerprint_json(self, reader: ReaderSplit) -> dict[str, Any]:
        return {**self.base.fingerprint_json(reader), "options": self._options_json(reader)}

    def content_parts(self, prefix: str = "") -> dict[str, Any]:
        return self.base.content_parts(prefix)

    def describe(self) -> str:
        how = f"spread={self.spread_units()}" if self.spread is not None else f"window={self.window}"
        return f"global_shuffle(seed={self.seed}, {how}) of {self.base.describe()}"

    def plan_json(self, reader: ReaderSplit) -> dict[str, Any]:
        return {**self.base.plan_json(reader), "kind": self.KIND, "options": self._options_json(reader)}

    @classmethod
    def state_lines(
        cls,
        state: Any,
        split: ReaderSplit | None,
        shards: tuple[Shard, ...] | None,
        indent: str = "",
        plan: dict[str, Any] | None = None,
    ) -> list[str]:
        return GlobalShuffleSource.state_lines(state, indent)

    def reader_counts(self, split: ReaderSplit) -> list[int] | None:
        epochs = self.base.options.epochs
        if epochs is None:
            return None
        rows = self.base.origin.row_access(self.base.spec)
        assert rows is not None
        first = self.order(rows)
        if not first.has_holes:  # every epoch alike
            return [epochs * len(range(part, rows.total, split.parts)) for part in range(split.parts)]
        per_epoch = [dataclasses.replace(first, epoch=e).rows_per_reader(split.parts) for e in range(epochs)]
        return [int(n) for n in np.sum(per_epoch, axis=0)]

    def shard_stage_refusal(self) -> str:
        return "call it before global_shuffle()"

    def with_options(self, **changes: Any) -> GlobalShuffleRoot:
        if set(changes) - {"epochs"}:
            raise ConfigError("global_shuffle() replaces shuffle_shards(), interleave() and parallel()")
        return dataclasses.replace(self, base=self.base.with_options(**changes))

"""The shard root: files (or in-memory data, or a cache) read shard by shard.

Its live source is :class:`~beamtok._src.stream.reading.source.ShardSource`: the shards of each epoch in
order (shuffled by seed), this reader's share of them, ``interleave`` open at once, through
the backend its origin makes (the shard processing run now, in worker processes, or a cache's
rows). Readers that split by examples read the whole stream through an
:class:`~beamtok._src.stream.ranks.example_split.ExampleSplitNode`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.core.spec import Spec
from beamtok._src.production.decode_pool import DecodePool
from beamtok._src.production.on_the_fly import OnTheFlyOrigin
from beamtok._src.production.protocol import ShardOrigin
from beamtok._src.sources.byte_ranges import cut_files
from beamtok._src.sources.readers import source_format
from beamtok._src.sources.urls import Shard, is_remote, local_path, range_url, split_range
from beamtok._src.stream.node import Node
from beamtok._src.stream.ranks.example_split import ExampleSplitNode
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.reading.shard_order import ShardOptions, ShardOrder
from beamtok._src.stream.reading.source import ShardSource
from beamtok._src.stream.reading.source_rows import SourceRows
from beamtok._src.stream.roots.base import RootPlan

__all__ = ["BY_LOCATION", "ShardsRoot", "shard_root", "urls_by_location"]


# Set while a fingerprint names files by where they are instead of by how their URLs are spelled.
BY_LOCATION: contextvars.ContextVar[bool] = contextvars.ContextVar("beamtok_urls_by_location", default=False)


@contextlib.contextmanager
def urls_by_location() -> Iterator[None]:
    """Inside the block, shard roots' fingerprints name local files by absolute path, so a
    relative and an absolute spelling of the same files (or a cache's inputs and the files
    themselves) agree."""
    token = BY_LOCATION.set(True)
    try:
        yield
    finally:
        BY_LOCATION.reset(token)


@dataclass(frozen=True)
class ShardsRoot(RootPlan):
    """Shards, the shard processing that turns them into examples, where they are read from,
    and how the source orders and opens them."""

    KIND = "shard source"

    files: tuple[Shard, ...]
    shard_spec: Spec  # the shard processing: how each shard becomes examples
    origin: ShardOrigin = dataclasses.field(default_factory=OnTheFlyOrigin, compare=False)
    options: ShardOptions = dataclasses.field(default_factory=ShardOptions)
    ranges: int | str | None = None  # the split_bytes files were cut into ranges by (sources/byte_ranges.py)

    @property
    def spec(self) -> Spec:
        return self.shard_spec

    @property
    def shards(self) -> tuple[Shard, ...]:
        return self.files

    @property
    def cached(self) -> bool:
        return self.origin.cached

    @property
    def spec_fingerprint(self) -> str:
        return self.shard_spec.fingerprint

    def source(self, split: ReaderSplit) -> ShardSource:
        """The live shard source for reader ``split``."""
        return ShardSource(
            list(self.files), self.origin.backend(self.shard_spec, self.options.workers), self.options, split
        )

    @property
    def seekable(self) -> bool:
        """Whether its examples can be read by number (:meth:`source_rows`): a packed cache
        read with one open shard."""
        return self.options.interleave == 1 and self.origin.row_access(self.shard_spec) is not None

    def source_rows(self, pool: DecodePool) -> SourceRows:
        """Its examples by number, as one reader taking every shard reads them (only when
        :attr:`seekable`), decoded into ``pool``."""
        rows = self.origin.row_access(self.shard_spec, pool=pool)
        assert rows is not None and self.options.interleave == 1
        backend = self.origin.backend(self.shard_spec, 0)
        counts = [backend.rows(shard) or 0 for shard in self.files]
        backend.close()
        return SourceRows(
            rows,
            counts,
            ShardOrder(len(self.files), self.options.shuffle_seed, ReaderSplit(mode="examples")),
            self.options.epochs,
        )

    def build(self, split: ReaderSplit) -> tuple[ShardSource, Node]:
        source = self.source(split)
        node: Node = ExampleSplitNode(source, split.part, split.parts) if split.mode == "examples" else source
        return source, node

    @functools.cached_property
    def _urls_digest(self) -> str:
        # once per root: a resume from thousands of old readers' states asks for it per state
        return hashlib.sha256("\n".join(s.url for s in self.files).encode()).hexdigest()[:20]

    @functools.cached_property
    def _locations_digest(self) -> str:
        return hashlib.sha256("\n".join(self._location(s) for s in self.files).encode()).hexdigest()[:20]

    def _location(self, shard: Shard) -> str:
        """Where a shard's data is, however its URL was spelled: a local file as its absolute
        path (a cache's inputs under the directory the build ran in), with its range."""
        manifest = getattr(getattr(self.origin, "cache", None), "manifest", None)
        url = manifest.input_path(shard.url) if manifest is not None else shard.location()
        if shard.data is not None or is_remote(url) or url.startswith("memory://"):
            return url
        whole, start, stop = split_range(url)
        path = os.path.abspath(local_path(whole))
        return range_url(path, start, stop) if whole != url else path

    def fingerprint_json(self, reader: ReaderSplit) -> dict[str, Any]:
        urls = self._locations_digest if BY_LOCATION.get() else self._urls_digest
        return {"shards": len(self.files), "urls": urls, "options": self.options.to_json(reader)}

    def content_parts(self, prefix: str = "") -> dict[str, Any]:
        spec = self.shard_spec.to_json()
        out: dict[str, Any] = {f"{prefix}shard list": {"count": len(self.files), "urls": [s.url for s in self.files]}}
        out[f"{prefix}input format"] = spec["source"]
        for i, step in enumerate(spec["steps"]):
            out[f"{prefix}step {i + 1} ({step.get('op', '?')})"] = {k: v for k, v in step.items() if k != "op"}
        out[f"{prefix}steps"] = [step.get("op") for step in spec["steps"]]
        out[f"{prefix}on_error"] = spec["on_error"]  # the packing is in the plan
        return out

    def describe(self) -> str:
        steps = [s.OP for s in self.shard_spec.steps] + ([self.shard_spec.pack.mode] if self.shard_spec.pack else [])
        return f"shards={len(self.files)}, steps={steps}"

    def plan_json(self, reader: ReaderSplit) -> dict[str, Any]:
        plan = {
            "kind": self.KIND,
            "options": self.options.to_json(reader),
            "packing": self.shard_spec.to_json()["pack"],
        }
        if self.ranges is not None:
            plan["ranges"] = self.ranges
        return plan

    @property
    def cuttable(self) -> bool:
        """Whether its files may still be cut into ranges: files read on the fly, not cut yet."""
        return (
            not self.cached
            and self.ranges is None
            and all(s.data is None and split_range(s.url)[1:] == (0, None) for s in self.files)
        )

    def cut(self, split_bytes: int | str) -> ShardsRoot:
        """This root with its files cut into ranges of ``split_bytes`` (or ``"auto"``), each a
        shard of its own (``beamtok._src.sources.byte_ranges``)."""
        if not self.cuttable:
            raise ConfigError(
                "only files read on the fly can be cut into ranges, once (not a cache, in-memory data or files already cut)"
            )
        files = cut_files(self.files, lambda url: source_format(url, self.shard_spec.source), split_bytes)
        return dataclasses.replace(self, files=files, ranges=split_bytes)

    @classmethod
    def state_lines(
        cls,
        state: Any,
        split: ReaderSplit | None,
        shards: tuple[Shard, ...] | None,
        indent: str = "",
        plan: dict[str, Any] | None = None,
    ) -> list[str]:
        if split is not None and split.mode == "examples" and isinstance(state, dict) and "upstream" in state:
            return [
                f"{indent}{ExampleSplitNode.describe_state(state)}",
                *ShardSource.state_lines(state["upstream"], shards, indent),
            ]
        return ShardSource.state_lines(state, shards, indent)

    def reader_counts(self, split: ReaderSplit) -> list[int] | None:
        if split.mode != "shards" or self.options.epochs is None:
            return None
        backend = self.origin.backend(self.shard_spec, 0)
        rows = [backend.rows(shard) for shard in self.files]
        backend.close()
        if any(count is None for count in rows):
            return None
        counts = []
        for part in range(split.parts):
            order = ShardOrder(
                len(self.files),
                self.options.shuffle_seed,
                dataclasses.replace(split, rank=part // split.num_workers, worker=part % split.num_workers),
            )
            counts.append(sum(rows[shard] or 0 for epoch in range(self.options.epochs) for shard in order.owned(epoch)))
        return counts

    def with_options(self, **changes: Any) -> ShardsRoot:
        return dataclasses.replace(self, options=dataclasses.replace(self.options, **changes))

    def with_spec(self, spec: Spec) -> ShardsRoot:
        return dataclasses.replace(self, shard_spec=spec)

    def with_origin(self, origin: ShardOrigin) -> ShardsRoot:
        return dataclasses.replace(self, origin=origin)


def shard_root(root: RootPlan, what: str) -> ShardsRoot:
    """``root`` as the plain shard root per-shard stages, caching and mixing start from, or
    a ConfigError naming the call (``what``) and why that root cannot take it."""
    if isinstance(root, ShardsRoot):
        return root
    raise ConfigError(f"{what}: {root.shard_stage_refusal()}")

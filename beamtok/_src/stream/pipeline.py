"""A stream as data: its root plan, how readers split it, and its stream stages.

The :class:`Pipeline` is what a ``Dataset`` holds and what an iterator runs: it computes the
fingerprints a state is stamped with, the parts a state's ``about`` keeps, and builds the live
stream for one reader (the root's source and node, then each stage over it). It never asks
what kind of root it holds.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.core.spec import fingerprint_of
from beamtok._src.production.workers import dataloader_worker
from beamtok._src.stream.node import Node, Stage, StreamContext
from beamtok._src.stream.ranks.equal_counts import EvenNode
from beamtok._src.stream.ranks.example_split import ExampleSplitNode
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.roots.base import RootPlan
from beamtok._src.stream.state import PlanJSON
from beamtok._src.stream.stream_plan import PLAN_VERSION, plan_parts, stage_configs
from beamtok._src.stream.timing import Timing

__all__ = ["Pipeline", "peel_even", "state_split"]


@dataclass(frozen=True)
class Pipeline:
    """``root`` read by the reader ``reader`` declares (rank, world size, split mode; its
    DataLoader worker is found when iterating), then ``stages`` in order."""

    root: RootPlan
    reader: ReaderSplit = dataclasses.field(default_factory=ReaderSplit)
    stages: tuple[Stage, ...] = ()
    even: str | None = (
        None  # every reader the same number of examples: "drop" or "pad" (beamtok._src.stream.ranks.equal_counts)
    )

    @property
    def spec_fingerprint(self) -> str:
        return self.root.spec_fingerprint

    @property
    def stream_fingerprint(self) -> str:
        return self.stream_fingerprint_for(self.reader.world_size)

    def stream_fingerprint_for(self, world_size: int) -> str:
        """The stream fingerprint of this pipeline read by ``world_size`` ranks."""
        known = self._fingerprints  # a resume checks every old reader's state against its world size's
        if world_size not in known:
            known[world_size] = self._stream_fingerprint(world_size)
        return known[world_size]

    @functools.cached_property
    def _fingerprints(self) -> dict[int, str]:
        return {}

    def location_fingerprint_for(self, world_size: int) -> str:
        """The stream fingerprint with local files named by where they are, not by how their
        URLs are spelled: states of the same files spelled relative or absolute (or of a cache
        and the files it was built from) agree on it."""
        from beamtok._src.stream.roots.shards import urls_by_location

        known = self._location_fingerprints
        if world_size not in known:
            with urls_by_location():
                known[world_size] = self._stream_fingerprint(world_size)
        return known[world_size]

    @functools.cached_property
    def _location_fingerprints(self) -> dict[int, str]:
        return {}

    def _stream_fingerprint(self, world_size: int) -> str:
        reader = dataclasses.replace(self.reader, rank=0, world_size=world_size)
        even = {"even": self.even} if self.even is not None else {}
        return fingerprint_of(
            {**self.root.fingerprint_json(reader), **even, "stages": [s.to_json() for s in self.stages]}
        )

    def plan_json(self) -> PlanJSON:
        """This pipeline as data for a state (``beamtok._src.stream.stream_plan``): the root's kind,
        options and packing, ``even``, and every stage's configuration, whole."""
        return {
            "version": PLAN_VERSION,
            "root": self.root.plan_json(self.reader),
            "even": self.even,
            "stages": [s.to_json() for s in self.stages],
        }

    def as_saved(self, plan: dict[str, Any] | None) -> Pipeline | None:
        """This pipeline with the options a resume may change (``Stage.FREE_ON_RESUME``: a
        batch's size) set back to the values a state's plan holds, or None when none differ,
        the plan does not hold them, or a later stage re-reads what it held (a shuffle after
        the batch holds batches of the old size)."""
        saved_stages = stage_configs(plan)
        if len(saved_stages) != len(self.stages):
            return None
        stages = list(self.stages)
        changed = False
        for i, (stage, (name, saved)) in enumerate(zip(self.stages, saved_stages)):
            free = type(stage).FREE_ON_RESUME
            if not free or name != stage.NAME:
                continue
            defaults = {f.name: f.default for f in dataclasses.fields(stage) if f.default is not dataclasses.MISSING}
            was = {
                k: saved.get(k, defaults.get(k)) for k in free if k in saved or k in defaults
            }  # a stage's JSON may leave out defaults
            old = {k: v for k, v in was.items() if v != getattr(stage, k)}
            if not old:
                continue
            if any(type(later).REREADS_ON_RESUME for later in self.stages[i + 1 :]):
                return None
            try:
                stages[i] = dataclasses.replace(stage, **old)
            except (TypeError, ValueError):
                return None
            changed = True
        return dataclasses.replace(self, stages=tuple(stages)) if changed else None

    def parts(self) -> dict[str, Any]:
        """Each part of the stream (not the reader's rank or world size), by name, in the order
        a refused resume lists them: the root's options, the stages, the root's data."""
        return {**plan_parts(self.plan_json()), **self.root.content_parts()}

    def reader_split(self) -> ReaderSplit:
        """This process's reader: the declared rank and split, and its DataLoader worker."""
        worker, num_workers = dataloader_worker()
        return dataclasses.replace(self.reader, worker=worker, num_workers=num_workers)

    def build(self, split: ReaderSplit, stages: int | None = None, timing: Timing | None = None) -> tuple[Any, Node]:
        """The live stream for reader ``split``: the root's source (for stats, closing and
        seeks) and the last node (after the first ``stages`` stages, or all). With ``timing``,
        every node is timed into it (``beamtok._src.stream.timing``)."""
        source, node = self.root.build(split)
        if self.even is not None:
            node = self._evened(node, split)
        if timing is not None:
            node = timing.timed(node, f"source ({self.root.KIND})")
        for depth, stage in enumerate(self.stages[:stages]):
            context = StreamContext(pad_id=self.root.pad_id, rebuild=functools.partial(self.build, stages=depth))
            node = stage.build(node, context)
            if timing is not None:
                node = timing.timed(node, f"stage {depth + 1} ({stage.NAME})")
        return source, node

    def _evened(self, node: Node, split: ReaderSplit) -> Node:
        """``node`` ending every reader at the same count (``self.even``)."""
        pad = self.root.pad_example() if self.even == "pad" else None
        if isinstance(node, ExampleSplitNode):
            node.even, node.pad = self.even, pad
            return node
        counts = self.root.reader_counts(split)
        if counts is None:
            raise ConfigError(
                f"even={self.even!r} needs every reader's example count before reading: readers split by examples "
                "(shard_by_rank(..., split='examples')), or a cache (its row counts) read to an end (not repeat() forever); "
                f"this {self.root.KIND} read by {split.parts} readers has neither"
            )
        return EvenNode(node, counts[split.part], min(counts) if self.even == "drop" else max(counts), pad)

    def explain(self, state: dict[str, Any]) -> list[str]:
        """The pipeline position of ``state`` (a whole state's ``pipeline``) in words, stage by
        stage from the root, each described by its own kind."""
        split = state_split(state)
        node = state.get("pipeline")
        chain = []
        for _ in self.stages:
            if not isinstance(node, dict):
                break
            chain.append(node)
            node = node.get("upstream")
        node, even = peel_even(node, self.even is not None)
        lines = self.root.explain(node, split) + even
        for i, (stage, own) in enumerate(zip(self.stages, reversed(chain))):
            lines.append(f"stage {i + 1} ({stage.NAME}): {stage.describe_state(own)}")
        return lines


def state_split(state: dict[str, Any]) -> ReaderSplit | None:
    """The reader a state names, or None when it names none readable."""
    try:
        return ReaderSplit(**state["split"])
    except Exception:
        return None


def peel_even(node: Any, evened: bool) -> tuple[Any, list[str]]:
    """The root's state below an even split's node (where the pipeline has one between the root
    and the first stage), and that node's line."""
    if evened and isinstance(node, dict) and set(node) == set(EvenNode.KEYS):
        return node["upstream"], [EvenNode.describe_state(node)]
    return node, []

"""The mix root: several datasets' shard roots mixed by weight, decided globally (see
``beamtok.stream.mix`` for the rule); its live source is
:class:`~beamtok.stream.mix.MixSource` over one shard source per dataset."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from beamtok.backends.decode_pool import DEFAULT_DECODE_BUDGET, DecodePool
from beamtok.base.errors import ConfigError
from beamtok.core.spec import Spec, fingerprint_of
from beamtok.sources.urls import Shard
from beamtok.stream.global_shuffle import GlobalShuffleSource
from beamtok.stream.mix import MixPlan, MixSource
from beamtok.stream.mix_seek import SeekingMix
from beamtok.stream.node import Node
from beamtok.stream.plan import source_runs
from beamtok.stream.reader_split import ReaderSplit
from beamtok.stream.roots.base import RootPlan
from beamtok.stream.roots.global_shuffle import GlobalShuffleRoot
from beamtok.stream.roots.shards import ShardsRoot
from beamtok.stream.source import ShardOptions, ShardSource
from beamtok.stream.split import ExampleSplitNode

__all__ = ["MixRoot"]

ABOUT_SOURCES = 16  # sources a state's ``about`` names one by one
MIX_OPEN_FILES = 64  # shard files a seeking mix keeps open, over all its sources


@dataclass(frozen=True)
class MixRoot(RootPlan):
    """The mixed datasets' roots and the mixing rule (weights or a schedule, seed, stop rule)."""

    KIND = "mix"

    mixed: tuple[ShardsRoot | GlobalShuffleRoot, ...]  # a source's shards, or a cache's global shuffle
    plan: MixPlan

    def __post_init__(self) -> None:
        for i, source in enumerate(self.mixed):
            if self.plan.stop != "first_exhausted" and source.options.epochs != 1:
                raise ConfigError(f"mix source {i} sets repeat(); with stop={self.plan.stop!r} the mix restarts exhausted sources itself")
        widths = [source.spec.pack.seq_len if source.spec.pack is not None else None for source in self.mixed]
        if len(set(widths)) > 1:
            shown = ", ".join(f"source {i}: {w if w is not None else 'not packed'}" for i, w in enumerate(widths))
            warnings.warn(
                f"mix sources make rows of different lengths ({shown}): batches will vary in width (rows padded to the "
                "longest in each batch); pack every source to one seq_len for batches of one shape",
                UserWarning,
                stacklevel=4,
            )
        pads = {source.spec.pad_id for source in self.mixed}
        if len(pads) > 1:
            raise ConfigError(f"mix sources pad with different token ids {sorted(pads)}: they use different tokenizers")

    @property
    def pad_id(self) -> int:
        return self.mixed[0].spec.pad_id

    @property
    def spec(self) -> Spec:
        raise ConfigError("a mix has one spec per source: see ds.sources[i].spec")

    @property
    def row_tokens(self) -> int | None:
        return self.mixed[0].row_tokens  # one width for all: checked when made

    @property
    def sources(self) -> tuple[RootPlan, ...]:
        return self.mixed

    @property
    def spec_fingerprint(self) -> str:
        # the same for on-the-fly and cached twins of every source
        return fingerprint_of({"mix": self.plan.to_json(), "sources": [s.spec_fingerprint for s in self.mixed]})

    def build(self, split: ReaderSplit) -> tuple[MixSource, Node]:
        forever = self.plan.stop != "first_exhausted"  # exhausted sources restart, reshuffled by their epoch
        caps = self.plan.max_epochs or (None,) * len(self.mixed)
        roots = [(root.with_options(epochs=caps[i]) if forever else root) for i, root in enumerate(self.mixed)]
        if split.mode == "examples" and all(root.seekable for root in roots):
            return self._seeking(roots, split)
        children = []
        for i, root in enumerate(roots):
            try:
                children.append(root.source(split))
            except ConfigError as error:
                raise ConfigError(f"mix source {i}: {error}") from None
        source = MixSource(children, self.plan, split)
        node: Node = ExampleSplitNode(source, split.part, split.parts) if split.mode == "examples" else source
        return source, node

    def _seeking(self, roots: list[ShardsRoot | GlobalShuffleRoot], split: ReaderSplit) -> tuple[MixSource, Node]:
        """Readers splitting a mix of packed caches by examples seek each source to the
        examples they keep (beamtok.stream.mix_seek) instead of reading the whole stream."""
        pool = DecodePool(DEFAULT_DECODE_BUDGET, open_files=MIX_OPEN_FILES)
        source = SeekingMix([root.source_rows(pool) for root in roots], self.plan, split.parts)
        return source, ExampleSplitNode(source, split.part, split.parts)

    def fingerprint_json(self, reader: ReaderSplit) -> dict[str, Any]:
        return {"mix": [s.stream_fingerprint() for s in self.mixed], "options": ShardOptions().to_json(reader)}

    def content_parts(self) -> dict[str, Any]:
        """Each source's data by name (the mixing rule, each source's options and packing are
        in the plan); past ``ABOUT_SOURCES`` sources, the rest as one digest, so a state of a
        mix of thousands of sources stays small."""
        out: dict[str, Any] = {}
        for i, source in enumerate(self.mixed[:ABOUT_SOURCES]):
            out.update(source.content_parts(f"mix source {i} "))
        rest = self.mixed[ABOUT_SOURCES:]
        if rest:
            name = f"mix sources {ABOUT_SOURCES}..{len(self.mixed) - 1}"
            out[name] = {"count": len(rest), "content": fingerprint_of([source.content_parts() for source in rest])}
        return out

    def describe(self) -> str:
        return f"mix of {len(self.mixed)} ({'; '.join(s.describe() for s in self.mixed)})"

    def plan_json(self, reader: ReaderSplit) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "options": ShardOptions().to_json(reader),
            "mix": self.plan.counts_json(),
            "sources": source_runs([source.plan_json(ReaderSplit()) for source in self.mixed]),
        }

    @classmethod
    def describe_state(cls, state: Any, split: ReaderSplit | None, shards: tuple[Shard, ...] | None, indent: str = "") -> list[str]:
        """``shards`` are not used: a mix's sources each have their own (see
        :meth:`describe_mix_state`)."""
        return cls.describe_mix_state(state, split, None, indent)

    @classmethod
    def describe_mix_state(
        cls, state: Any, split: ReaderSplit | None, sources: tuple[tuple[Shard, ...], ...] | None, indent: str = ""
    ) -> list[str]:
        """Lines describing a mix's state, each source's shards named by file where given."""
        lines: list[str] = []
        if split is not None and split.mode == "examples" and isinstance(state, dict) and "upstream" in state:
            lines.append(f"{indent}{ExampleSplitNode.describe_state(state)}")
            state = state["upstream"]
        lines += MixSource.describe_state(state, indent)
        positions = state.get("positions") if isinstance(state, dict) else None
        if isinstance(positions, list):  # a seeking mix: each source's next example, by number
            shown = ", ".join(f"{i}: {p}" for i, p in enumerate(positions[:ABOUT_SOURCES]))
            more = f" (and {len(positions) - ABOUT_SOURCES} more)" if len(positions) > ABOUT_SOURCES else ""
            lines.append(f"{indent}  each source's next example (read by seeking): {shown}{more}")
        children = state.get("sources") if isinstance(state, dict) else None
        for i, child in enumerate(children if isinstance(children, list) else []):
            shards = sources[i] if sources is not None and i < len(sources) else None
            lines.append(f"{indent}  mix source {i}:")
            if isinstance(child, dict) and "slots" not in child and "position" in child:  # a global shuffle's
                lines += GlobalShuffleSource.describe_state(child, indent + "    ")
            else:
                lines += ShardSource.describe_state(child, shards, indent + "    ")
        return lines

    def explain(self, state: Any, split: ReaderSplit | None) -> list[str]:
        return self.describe_mix_state(state, split, tuple(s.shards for s in self.mixed))

    def pad_example(self) -> dict[str, Any]:
        return {**self.mixed[0].pad_example(), "source": -1}

    def shard_stage_refusal(self) -> str:
        return "set it on each source of the mix, before Dataset.mix()"

    def with_options(self, **changes: Any) -> MixRoot:
        raise ConfigError(f"{', '.join(sorted(changes))}: set it on each source of the mix, before Dataset.mix()")

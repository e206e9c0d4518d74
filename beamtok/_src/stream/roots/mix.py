"""The mix root: several datasets' shard roots mixed by weight, decided globally (see
``beamtok._src.stream.mixing.mix_plan`` for the rule); its live source is
:class:`~beamtok._src.stream.mixing.reading.MixSource` over one shard source per dataset."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.core.spec import Spec, fingerprint_of
from beamtok._src.production.decode_pool import DEFAULT_DECODE_BUDGET, DecodePool
from beamtok._src.sources.urls import Shard
from beamtok._src.stream.global_order.shuffle_source import GlobalShuffleSource
from beamtok._src.stream.mixing.base import MixBase
from beamtok._src.stream.mixing.mix_plan import MixPlan
from beamtok._src.stream.mixing.reading import MixSource
from beamtok._src.stream.mixing.rows import MixRows
from beamtok._src.stream.mixing.seeking import SeekingMix
from beamtok._src.stream.node import Node
from beamtok._src.stream.ranks.example_split import ExampleSplitNode
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.reading.shard_order import ShardOptions
from beamtok._src.stream.reading.source import ShardSource
from beamtok._src.stream.roots.base import RootPlan
from beamtok._src.stream.roots.global_shuffle import GlobalShuffleRoot
from beamtok._src.stream.roots.shards import ShardsRoot
from beamtok._src.stream.stream_plan import mix_source_plans, source_runs

__all__ = ["MixRoot"]

ABOUT_SOURCES = 16  # sources a state's ``about`` names one by one
MIX_OPEN_FILES = 64  # shard files a seeking mix keeps open, over all its sources


@dataclass(frozen=True)
class MixRoot(RootPlan):
    """The mixed datasets' roots and the mixing rule (weights or a schedule, seed, stop rule)."""

    KIND = "mix"

    mixed: tuple[ShardsRoot | GlobalShuffleRoot | MixRoot, ...]  # a source's shards, a cache's global shuffle, or a mix
    plan: MixPlan

    def __post_init__(self) -> None:
        caps = self.plan.max_epochs or (None,) * len(self.mixed)
        for i, source in enumerate(self.mixed):
            if isinstance(source, MixRoot):
                self._check_inner(i, source, caps[i])
            elif self.plan.stop != "first_exhausted" and source.options.epochs != 1:
                raise ConfigError(
                    f"mix source {i} sets repeat(); with stop={self.plan.stop!r} the mix restarts exhausted sources itself"
                )
        widths = [source.seq_len for source in self.mixed]
        if len(set(widths)) > 1:
            shown = ", ".join(f"source {i}: {w if w is not None else 'not packed'}" for i, w in enumerate(widths))
            warnings.warn(
                f"mix sources make rows of different lengths ({shown}): batches will vary in width (rows padded to the "
                "longest in each batch); pack every source to one seq_len for batches of one shape",
                UserWarning,
                stacklevel=4,
            )
        pads = {source.pad_id for source in self.mixed}
        if len(pads) > 1:
            raise ConfigError(f"mix sources pad with different token ids {sorted(pads)}: they use different tokenizers")

    def _check_inner(self, i: int, inner: MixRoot, cap: int | None) -> None:
        """A mix mixed into this one keeps its own rule; it is read once if it ends (a mix
        has no next epoch to restart into) and has no epochs to cap if it never does."""
        if inner.plan.never_ends:
            if cap is not None:
                raise ConfigError(f"mix source {i} is a mix that never ends: max_epochs has no epochs of it to cap")
            return
        if self.plan.stop != "first_exhausted" and cap != 1:
            raise ConfigError(
                f"mix source {i} is a mix that ends (stop={inner.plan.stop!r}{', with max_epochs' if inner.plan.max_epochs else ''}) and "
                f"this mix (stop={self.plan.stop!r}) would restart it when it does; a mix cannot be restarted: read it once "
                f"(max_epochs=1 for it here) or stop this mix with it (stop='first_exhausted')"
            )

    @property
    def pad_id(self) -> int:
        return self.mixed[0].pad_id

    @property
    def seq_len(self) -> int | None:
        return self.mixed[0].seq_len  # one width for all: checked when made

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

    def _roots(self) -> list[ShardsRoot | GlobalShuffleRoot | MixRoot]:
        """The sources as this mix reads them: unless the mix stops with its first exhausted
        source, each repeats (reshuffled by its epoch) up to its cap; a mixed mix as it is."""
        if self.plan.stop == "first_exhausted":
            return list(self.mixed)
        caps = self.plan.max_epochs or (None,) * len(self.mixed)
        return [
            root if isinstance(root, MixRoot) else root.with_options(epochs=caps[i])
            for i, root in enumerate(self.mixed)
        ]

    def build(self, split: ReaderSplit) -> tuple[MixBase, Node]:
        if split.mode == "examples" and self.seekable_here():
            return self._seeking(split)
        source = self.source(split)
        node: Node = ExampleSplitNode(source, split.part, split.parts) if split.mode == "examples" else source
        return source, node

    def source(self, split: ReaderSplit) -> MixSource:
        """The mix read (not seeked) by reader ``split``: by readers splitting by examples, the
        whole mixed stream; as another mix's source, with that mix's split."""
        children: list[Any] = []
        for i, root in enumerate(self._roots()):
            try:
                children.append(root.source(split))
            except ConfigError as error:
                raise ConfigError(f"mix source {i}: {error}") from None
        return MixSource(children, self.plan, split)

    @property
    def seekable(self) -> bool:
        """Whether its examples can be read by number (:meth:`source_rows`): a mix that never
        ends, of sources that can."""
        return self.plan.never_ends and self.seekable_here()

    def seekable_here(self) -> bool:
        """Whether readers splitting this mix by examples can seek its sources instead of
        reading the stream: every source seekable, and no mixed mix under ``all_exhausted``
        (which watches each source's epochs; a mix that never ends has none)."""
        if self.plan.stop == "all_exhausted" and any(isinstance(root, MixRoot) for root in self.mixed):
            return False
        return all(root.seekable for root in self._roots())

    def source_rows(self, pool: DecodePool) -> MixRows:
        """Its examples by number (only when :attr:`seekable`), decoded into ``pool``."""
        return MixRows([root.source_rows(pool) for root in self._roots()], self.plan)

    def _seeking(self, split: ReaderSplit) -> tuple[MixBase, Node]:
        """Readers splitting a mix of packed caches by examples seek each source to the
        examples they keep (beamtok._src.stream.mixing.seeking) instead of reading the whole stream."""
        pool = DecodePool(DEFAULT_DECODE_BUDGET, open_files=MIX_OPEN_FILES)
        source = SeekingMix([root.source_rows(pool) for root in self._roots()], self.plan, split.parts)
        return source, ExampleSplitNode(source, split.part, split.parts)

    def stream_fingerprint(self) -> str:
        """The stream fingerprint of this mix alone (its rule included), read by one reader
        with no stage: what an outer mix's fingerprint covers of it."""
        return fingerprint_of({**self.fingerprint_json(ReaderSplit()), "rule": self.plan.to_json(), "stages": []})

    def fingerprint_json(self, reader: ReaderSplit) -> dict[str, Any]:
        return {"mix": [s.stream_fingerprint() for s in self.mixed], "options": ShardOptions().to_json(reader)}

    def content_parts(self, prefix: str = "") -> dict[str, Any]:
        """Each source's data by name (the mixing rule, each source's options and packing are
        in the plan); past ``ABOUT_SOURCES`` sources, the rest as one digest, so a state of a
        mix of thousands of sources stays small."""
        out: dict[str, Any] = {}
        for i, source in enumerate(self.mixed[:ABOUT_SOURCES]):
            out.update(source.content_parts(f"{prefix}mix source {i} "))
        rest = self.mixed[ABOUT_SOURCES:]
        if rest:
            name = f"{prefix}mix sources {ABOUT_SOURCES}..{len(self.mixed) - 1}"
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
    def state_lines(
        cls,
        state: Any,
        split: ReaderSplit | None,
        shards: tuple[Shard, ...] | None,
        indent: str = "",
        plan: dict[str, Any] | None = None,
    ) -> list[str]:
        """``shards`` are not used: a mix's sources each have their own (see
        :meth:`describe_mix_state`)."""
        return cls.describe_mix_state(state, split, None, indent, plan)

    @classmethod
    def describe_mix_state(
        cls,
        state: Any,
        split: ReaderSplit | None,
        sources: tuple[tuple[Shard, ...], ...] | None,
        indent: str = "",
        plan: dict[str, Any] | None = None,
    ) -> list[str]:
        """Lines describing a mix's state, each source's shards named by file where given;
        each source is described as what the mix's ``plan`` says it is (a mix, a global
        shuffle, a shard source)."""
        lines: list[str] = []
        if split is not None and split.mode == "examples" and isinstance(state, dict) and "upstream" in state:
            lines.append(f"{indent}{ExampleSplitNode.describe_state(state)}")
            state = state["upstream"]
        lines += MixSource.state_lines(state, indent)
        positions = state.get("positions") if isinstance(state, dict) else None
        if isinstance(positions, list):  # a seeking mix: each source's next example, by number
            shown = ", ".join(f"{i}: {p}" for i, p in enumerate(positions[:ABOUT_SOURCES]))
            more = f" (and {len(positions) - ABOUT_SOURCES} more)" if len(positions) > ABOUT_SOURCES else ""
            lines.append(f"{indent}  each source's next example (read by seeking): {shown}{more}")
        children = state.get("sources") if isinstance(state, dict) else None
        plans = mix_source_plans(plan) if plan is not None else []
        for i, child in enumerate(children if isinstance(children, list) else []):
            shards = sources[i] if sources is not None and i < len(sources) else None
            child_plan = plans[i] if i < len(plans) else None
            kind = child_plan.get("kind") if isinstance(child_plan, dict) else None
            lines.append(f"{indent}  mix source {i}:")
            if kind == cls.KIND:
                lines += cls.describe_mix_state(child, None, None, indent + "    ", child_plan)
            elif kind == GlobalShuffleRoot.KIND:
                lines += GlobalShuffleSource.state_lines(child, indent + "    ")
            else:
                lines += ShardSource.state_lines(child, shards, indent + "    ")
        return lines

    def explain(self, state: Any, split: ReaderSplit | None) -> list[str]:
        plan = self.plan_json(split or ReaderSplit())
        return self.describe_mix_state(state, split, tuple(s.shards for s in self.mixed), "", plan)

    def pad_example(self) -> dict[str, Any]:
        return {**self.mixed[0].pad_example(), "source": -1}

    def shard_stage_refusal(self) -> str:
        return "set it on each source of the mix, before Dataset.mix()"

    def with_options(self, **changes: Any) -> MixRoot:
        raise ConfigError(f"{', '.join(sorted(changes))}: set it on each source of the mix, before Dataset.mix()")

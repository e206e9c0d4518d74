"""What every root of a stream is made of: a frozen plan that builds the live source.

A stream is a root plan followed by stream stages. The plan (a :class:`RootPlan`) is frozen:
it says where examples come from (shards read on the fly or from a cache, a mix of datasets,
a global shuffle of a cache's rows), writes the JSON its stream fingerprint covers, lists its
its data as parts for the state's ``about`` (so a refused resume names what changed) and its
kind and options as the state's plan (data, read back by code), describes a saved
state of its source in words, and builds the live source for one reader. The facade
(``Dataset``) holds ``(root, reader, stages)`` and asks the root; it never asks what kind of
root it holds. A new root is one plan module here (with its live source, or beside it) and
one constructor on ``Dataset``.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

from beamtok._src.base.errors import ConfigError
from beamtok._src.core.spec import fingerprint_of
from beamtok._src.stream.node import Node
from beamtok._src.stream.ranks.reader_split import ReaderSplit

if TYPE_CHECKING:
    from beamtok._src.core.spec import Spec
    from beamtok._src.sources.urls import Shard

__all__ = ["RootPlan"]


class RootPlan(abc.ABC):
    """A stream's root: where its examples come from, before any stream stage."""

    KIND: ClassVar[str]  # the root's name in descriptions (``shard source``, ``mix``...)

    @abc.abstractmethod
    def build(self, split: ReaderSplit) -> tuple[Any, Node]:
        """The live root for reader ``split``: ``(source, node)``, where ``source`` keeps the
        stats, closes workers and seeks (``state_at``), and ``node`` is what the first stage
        reads (the source itself, or a split of its examples between readers)."""

    @abc.abstractmethod
    def fingerprint_json(self, reader: ReaderSplit) -> dict[str, Any]:
        """What the stream fingerprint covers of this root, for readers split as ``reader``
        (the stages are added by the caller under ``"stages"``)."""

    @property
    @abc.abstractmethod
    def spec_fingerprint(self) -> str:
        """The fingerprint of the shard processing behind this root."""

    def stream_fingerprint(self) -> str:
        """The stream fingerprint of this root alone, read by one reader with no stage (what a
        mix's fingerprint covers of each of its sources)."""
        return fingerprint_of({**self.fingerprint_json(ReaderSplit()), "stages": []})

    @abc.abstractmethod
    def plan_json(self, reader: ReaderSplit) -> dict[str, Any]:
        """This root as data for a state's plan: ``kind`` (its ``KIND``), ``options`` (what
        the stream fingerprint covers of its options) and ``packing``, every value whole."""

    @abc.abstractmethod
    def content_parts(self) -> dict[str, Any]:
        """The root's data (shard lists, steps, packing, mixing rule) as named parts."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One line: what this root reads."""

    @classmethod
    @abc.abstractmethod
    def state_lines(
        cls,
        state: Any,
        split: ReaderSplit | None,
        shards: tuple[Shard, ...] | None,
        indent: str = "",
        plan: dict[str, Any] | None = None,
    ) -> list[str]:
        """Lines describing a saved state of this root's node (with ``shards``, the files of
        the pipeline it belongs to, shards are named by file; ``plan``: the root's part of the
        state's plan, which says what a mix's sources are)."""

    def explain(self, state: Any, split: ReaderSplit | None) -> list[str]:
        """Lines describing a saved state of this root, with the shards it reads named by file."""
        return self.state_lines(state, split, self.shards)

    # What every root answers, most by refusing: the facade asks, never checks the kind.

    @property
    def pad_id(self) -> int:
        return self.spec.pad_id

    @property
    def seq_len(self) -> int | None:
        """The length its packing makes rows (None: not packed)."""
        pack = self.spec.pack
        return pack.seq_len if pack is not None else None

    @property
    def row_tokens(self) -> int | None:
        """Tokens in every row, where rows have one width (packed), else None."""
        pack = self.spec.pack
        return pack.seq_len if pack is not None and pack.packing.HAS_SEQ_LEN else None

    @property
    def spec(self) -> Spec:
        """The shard processing behind this root."""
        raise ConfigError(f"a {self.KIND} has no single spec")

    @property
    def shards(self) -> tuple[Shard, ...]:
        return ()

    @property
    def cached(self) -> bool:
        return False

    @property
    def sources(self) -> tuple[RootPlan, ...]:
        """The roots this one reads from (a mix: its sources; others: itself)."""
        return (self,)

    def reader_counts(self, split: ReaderSplit) -> list[int] | None:
        """How many examples each of ``split.parts`` readers gets over the whole stream, where
        that is known before reading (a cache's row counts), else None."""
        return None

    def pad_example(self) -> dict[str, Any]:
        """A row of padding shaped like this root's rows (``even="pad"``)."""
        from beamtok._src.stream.ranks.equal_counts import pad_example

        return pad_example(self.spec)

    def shard_stage_refusal(self) -> str:
        """Why per-shard stages, caching and mixing cannot start from this root (see
        ``beamtok._src.stream.roots.shards.shard_root``)."""
        return f"not on a {self.KIND}"

    def with_options(self, **changes: Any) -> RootPlan:
        """This root with other shard options (``epochs``, ``shuffle_seed``, ``interleave``,
        ``workers``), or a ConfigError naming what the root cannot take."""
        raise ConfigError(f"{', '.join(sorted(changes))}: not on a {self.KIND}")

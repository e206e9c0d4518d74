"""DatasetIterator: the live stream of a Dataset, with a versioned, strict JSON state."""

from __future__ import annotations

import dataclasses
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from beamtok._src.base.errors import ConfigError, StateError
from beamtok._src.base.validate import check_int
from beamtok._src.base.validate import check_int as check_option
from beamtok._src.sources.retrying import remote_retries
from beamtok._src.stream.describe import changes, describe
from beamtok._src.stream.node import Node
from beamtok._src.stream.pipeline import Pipeline
from beamtok._src.stream.ranks.elastic import check_readers
from beamtok._src.stream.ranks.reader_split import ReaderSplit
from beamtok._src.stream.stages.collate import Batched
from beamtok._src.stream.state import DeliveredJSON, IteratorState, check_keys, copy_state
from beamtok._src.stream.state_migration import STATE_VERSION, migrate
from beamtok._src.stream.stream_plan import plan_of
from beamtok._src.stream.timing import Timing, describe_timing

__all__ = ["STATE_VERSION", "DatasetIterator", "Delivered"]


@dataclass(frozen=True)
class Delivered:
    """What an iterator has returned: items (batches or examples), rows, real and pad tokens."""

    items: int = 0
    examples: int = 0
    tokens: int = 0
    pad_tokens: int = 0

    def plus(self, item: Any) -> Delivered:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], dict):
            item = item[1]  # enumerate(): (number, batch or example)
        if not isinstance(item, dict) or "segment_ids" not in item:
            return dataclasses.replace(self, items=self.items + 1)
        segments = item["segment_ids"]
        counted = item.counted if isinstance(item, Batched) else None
        if counted is not None:  # counted by batch() from its rows' blocks
            real, pad = counted
        else:
            segments = np.asarray(segments)
            real = int(np.count_nonzero(segments))
            pad = int(segments.size) - real
        shape = segments.shape
        rows = 1 if len(shape) <= 1 else shape[0] if len(shape) == 2 else int(np.prod(shape[:-1]))
        return Delivered(self.items + 1, self.examples + rows, self.tokens + real, self.pad_tokens + pad)

    def to_json(self) -> DeliveredJSON:
        return DeliveredJSON(items=self.items, examples=self.examples, tokens=self.tokens, pad_tokens=self.pad_tokens)

    @classmethod
    def from_state(cls, state: Any) -> Delivered:
        saved = state.get("delivered") if isinstance(state, dict) else None
        if saved is None:
            return cls()
        check_keys(saved, DeliveredJSON, "delivered")
        return cls(**{name: check_int(value, name, "delivered") for name, value in saved.items()})

    @classmethod
    def total(cls, parts: Iterable[Delivered]) -> Delivered:
        found = list(parts)
        return cls(*(sum(getattr(d, f.name) for d in found) for f in dataclasses.fields(cls)))


def skipped_of(state: Any) -> list[list[int]]:
    """The ranges ``[first item, count]`` a state says were skipped, checked."""
    saved = state.get("skipped", []) if isinstance(state, dict) else []
    if not isinstance(saved, list) or not all(isinstance(r, list) and len(r) == 2 for r in saved):
        raise StateError("skipped must be a list of [first item, count] pairs")
    return [[check_int(a, "skipped", "state"), check_int(b, "skipped", "state")] for a, b in saved]


class DatasetIterator:
    """Iterates a Dataset; ``state_dict()`` at any point resumes exactly there.

    The state is JSON: the state format version, the spec and stream fingerprints, which part
    of the data this reader owns, and the positions of the stages. It holds no token data.
    Nothing is read and no worker process starts before the first ``next()``; as a context
    manager it stops its workers on exit.
    """

    def __init__(
        self, pipeline: Pipeline, split: ReaderSplit, state: IteratorState | dict[str, Any] | list[Any] | None = None
    ) -> None:
        """Made by :meth:`~beamtok.Dataset.iter`, which says what each start means.

        Args:
            pipeline: The stream as data (``Dataset.pipeline``).
            split: This reader's part of it.
            state: Where to start: a state, the list of every reader's state of an earlier run, or None.
        """
        self.pipeline = pipeline
        self.split = split
        self._spec_fp = pipeline.spec_fingerprint
        self._stream_fp = pipeline.stream_fingerprint
        self._about = describe(pipeline)
        self._plan = pipeline.plan_json()
        self._timing = Timing()
        self._source, self._root = pipeline.build(split, timing=self._timing)  # the root source, and the last stage
        self._delivered = Delivered()
        self._skipped: list[list[int]] = []  # [first item skipped, how many]: what skip() passed over
        self._pending_merge: tuple[list[dict[str, Any]], list[ReaderSplit]] | None = None
        if isinstance(state, list):
            own = self._start_merged(state)
            if own is not None:  # every reader's state, this one's among them: it resumes from its own
                self._delivered = Delivered.from_state(own)
                self._skipped = skipped_of(own)
            elif (
                split.part == 0
            ):  # the old readers' deliveries go to one new reader, so the sum over readers stays right
                self._delivered = Delivered.total(Delivered.from_state(s) for s in state)
                self._skipped = sorted(r for s in state for r in skipped_of(s))
        elif state is not None:
            self._root.reset(self._check(state)["pipeline"])
            self._delivered = Delivered.from_state(state)
            self._skipped = skipped_of(state)
        else:
            self._root.reset(None)

    def _start_merged(self, states: list[Any]) -> dict[str, Any] | None:
        """Start from the states of all readers of a run, which may have had another world size
        (see ``beamtok._src.stream.ranks.elastic``). Each state is checked now; merging them may read (a
        shuffle finds where old readers' windows end), so it waits for the first ``next()``.
        Where the readers were split as this run's are, this reader's own state is restored
        (and returned): the same as being handed it alone."""
        if not states:
            raise StateError("an empty list of states: pass every old reader's state_dict()")
        checked = []
        for state in states:
            if isinstance(state, dict) and isinstance(state.get("split"), dict):
                try:
                    old = ReaderSplit(**state["split"])
                except (TypeError, ConfigError) as e:
                    raise StateError(f"a state's split is malformed: {e}") from None
                checked.append((old, self._check(state, split=old)))
            else:
                self._check(state)  # raises the plain error
        checked.sort(key=lambda pair: pair[0].part)
        olds = [old for old, _ in checked]
        check_readers(olds)
        if olds[0].parts == self.split.parts and olds[0].mode == self.split.mode:
            own = next(state for old, state in checked if old.part == self.split.part)
            self._root.reset(own["pipeline"])
            return own
        self._root.check_merge(olds)
        self._root.reset(None)
        self._pending_merge = ([state["pipeline"] for _, state in checked], olds)
        return None

    def _merge_now(self) -> None:
        if self._pending_merge is not None:
            states, olds = self._pending_merge
            self._pending_merge = None
            self._root.reset(self._root.merge(states, olds, self.split))

    def _check(self, state: Any, split: ReaderSplit | None = None) -> dict[str, Any]:
        """The state, checked against this pipeline (for ``split``, an old reader of the same
        stream on another world size: its fingerprint is recomputed for that split)."""
        if isinstance(state, (str, bytes)):
            raise StateError("the state is a JSON string, not a dict: pass json.loads(text) (or json.load(file))")
        if split is None:
            state = copy_state(state)  # restoring never changes (or keeps) the caller's state
        # an old reader's state (split given) is only read: merges copy nothing, the merged state is copied when restored
        if not isinstance(state, dict) or "beamtok_state" not in state:
            raise StateError("not a beamtok state: it has no 'beamtok_state' version key")
        state = migrate(state)
        check_keys(state, IteratorState, "state")
        plan_of(state)  # a plan of another version is refused by name, whatever else matches
        stream_fp = self._stream_fp if split is None else self.pipeline.stream_fingerprint_for(split.world_size)
        saved_split = state["split"]
        if split is None and isinstance(saved_split, dict) and saved_split.get("world_size") != self.split.world_size:
            world = saved_split.get("world_size")
            if isinstance(world, int) and world >= 1 and state["stream"] == self.pipeline.stream_fingerprint_for(world):
                raise StateError(
                    f"state belongs to reader {saved_split}, but this reader is {self.split.to_json()}: the rank split "
                    "differs; to resume on another world size pass the list of every old reader's state "
                    "(iter_merged([state_0, state_1, ...]))"
                )
        if state["spec"] == self._spec_fp and state["stream"] != stream_fp:
            saved = self.pipeline.as_saved(plan_of(state))  # a batch of another size may resume
            world = self.split.world_size if split is None else split.world_size
            if saved is not None and state["stream"] == saved.stream_fingerprint_for(world):
                stream_fp = state["stream"]
        if state["spec"] == self._spec_fp and state["stream"] != stream_fp and "stream_by_location" in state:
            world = self.split.world_size if split is None else split.world_size
            if state["stream_by_location"] == self.pipeline.location_fingerprint_for(world):
                stream_fp = state["stream"]  # the same files, their URLs spelled otherwise
        if state["spec"] != self._spec_fp or state["stream"] != stream_fp:
            what = "spec" if state["spec"] != self._spec_fp else "stream"
            changed = changes(state.get("about"), self.pipeline, plan_of(state))
            raise StateError(
                f"state was saved by another pipeline ({what} fingerprint {state[what]} there, "
                f"{self._spec_fp if what == 'spec' else stream_fp} here); "
                + (changed or "tokenizer, fields, packing, shard list, shuffle, batch or other stages differ")
            )
        if split is None and isinstance(saved_split, dict) and saved_split.get("num_workers") != self.split.num_workers:
            raise StateError(
                f"state belongs to reader {saved_split}, but this reader is {self.split.to_json()}: it was saved by DataLoader "
                f"worker {saved_split.get('worker')} of {saved_split.get('num_workers')}, this is worker {self.split.worker} of "
                f"{self.split.num_workers}; a loader resumes with the number of workers it saved with; for another number, pass "
                "every old worker's state: ds.to_torch(resume_from=beamtok.reader_states(loader_state_dict))"
            )
        if split is None and state["split"] != self.split.to_json():
            raise StateError(
                f"state belongs to reader {state['split']}, but this reader is {self.split.to_json()} "
                "(rank, world size or DataLoader workers differ)"
            )
        return state

    def __iter__(self) -> DatasetIterator:
        return self

    def __enter__(self) -> DatasetIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __next__(self) -> Any:
        entered = self._timing.entered()
        try:
            if self._pending_merge is not None:
                self._merge_now()
            item = next(self._root)
        finally:
            self._timing.left(entered)
        self._delivered = self._delivered.plus(item)
        return item

    def state_dict(self) -> IteratorState:
        """Where the stream is now, as a JSON-serializable dict (see :class:`~beamtok._src.stream.state.IteratorState`)."""
        self._merge_now()
        state = IteratorState(
            beamtok_state=STATE_VERSION,
            spec=self._spec_fp,
            stream=self._stream_fp,
            split=self.split.to_json(),
            pipeline=self._root.state_dict(),
            plan=self._plan,
            about=self._about,
            delivered=self._delivered.to_json(),
        )
        if self._skipped:
            state["skipped"] = [list(r) for r in self._skipped]
        state["stream_by_location"] = self.pipeline.location_fingerprint_for(self.split.world_size)
        return state

    @property
    def step(self) -> int:
        """Items this iterator has passed: returned (``delivered.items``) plus skipped."""
        return self._delivered.items + sum(count for _, count in self._skipped)

    @property
    def seeks(self) -> bool:
        """Whether :meth:`skip` moves without reading: a packed cache read by one reader in
        order (``interleave(1)``), or a global shuffle, with only ``batch``, ``take`` and
        ``enumerate`` after it. Elsewhere ``skip`` reads the items and drops them."""
        self._merge_now()
        return self._root.can_seek()

    def set_weights(self, weights: list[float] | tuple[float, ...]) -> int:
        """A mix's new weights (one per source), from the first block boundary no reader has
        passed: readers that call this at the same step agree on it. Returns that global
        example index. The change is kept in the state, so a resume (on any world size)
        replays it. Call it in the process that iterates: with DataLoader workers, each
        worker's iterator is out of reach.

        Args:
            weights: One weight a source, in the order the mix was given them.
        Returns:
            The global example index from which the new weights hold.
        Raises:
            ConfigError: The stream is not a mix, or the weights are not one a source.
        """
        if isinstance(weights, dict):
            raise ConfigError(
                f"set_weights takes one weight per source, in the order the mix was given its sources "
                f"({len(self.pipeline.root.sources)} numbers), not a dict: got {weights!r}"
            )
        self._merge_now()
        return int(self._source.set_weights(list(weights)))

    def skip(self, items: int) -> int:
        """Pass the next ``items`` items (batches, when batched) as if read and dropped, e.g.
        the steps after a loss spike: the state stays exact, and records the range skipped
        (``inspect`` shows it). Seeks without reading where :attr:`seeks` says so, otherwise
        reads through. Returns how many were passed (fewer at the end of the stream).

        Args:
            items: Items (batches, when batched) to pass.
        Returns:
            How many were passed (fewer at the end of the stream).
        """
        items = check_option(items, "items to skip")
        first = self.step
        if self.seeks:
            passed = int(self._root.seek(items))
        else:
            passed = 0
            for _ in range(items):
                try:
                    next(self._root)
                except StopIteration:
                    break
                passed += 1
        if passed:
            self._skipped.append([first, passed])
        if passed < items:
            warnings.warn(
                f"skip({items}): the stream ended after {passed} more item(s) (at step {first + passed}); nothing is left to read",
                stacklevel=2,
            )
        return passed

    def close(self) -> None:
        """Stop tokenization worker processes now (they also stop when the iterator is freed)."""
        self._source.close()

    @property
    def source(self) -> Any:
        """The root of the stream: a ShardSource, or a MixSource over several."""
        return self._source

    @property
    def root(self) -> Node:
        return self._root

    def stats(self, *, timing: bool = False) -> dict[str, Any]:
        """``delivered``: what this iterator returned to you (examples, i.e. rows, real tokens,
        pad tokens, and batches when batched). The other figures are what the source has read:
        documents read, emitted, skipped (by reason) and truncated; examples, tokens, pad tokens
        and padding waste (pad / all tokens); the epoch (for a mix: each source's stats and
        epoch, and the realised proportions). They run ahead of ``delivered`` by what a shuffle
        window holds, and include other readers' examples under an example split.
        ``remote_retries``: transient remote read errors retried so far by this process and its
        tokenization workers (all its streams). ``timing=True`` adds ``timing``, the live view of
        :meth:`timing` (left out by default: it differs run to run, the counts do not).

        Args:
            timing: Add the live ``timing`` view.
        Returns:
            The figures as a JSON-serializable dict.
        """
        self._merge_now()
        self._root.catch_up()  # a restored shuffle window counts as read, as in the run that saved the state
        stats = self._source.stats_json()
        total = stats["tokens"] + stats["pad_tokens"]
        stats["padding_waste"] = stats["pad_tokens"] / total if total else 0.0
        stats["delivered"] = self._delivered.to_json()
        stats["remote_retries"] = remote_retries()
        node: Node | None = self._root
        while node is not None:  # figures stages keep of their own (a balanced split's imbalance)
            stats.update(node.stage_stats())
            node = node.upstream
        if timing:
            stats["timing"] = self._timing.to_json()
        return stats

    def timing(self) -> dict[str, Any]:
        """Where this iterator's time went (also ``stats()["timing"]``): each stage's own
        seconds (its time in ``next()`` less its upstream's) and share, the first item's
        time, and the stall: the share of the consumer's time since the first item spent
        waiting inside ``next()``. Not part of the state; a resumed iterator counts afresh."""
        return self._timing.to_json()

    def print_timing(self, file: Any = None) -> None:
        """Print :meth:`timing` as a table (to stderr unless ``file`` is given).

        Args:
            file: Where to print (None: stderr).
        """
        print(describe_timing(self._timing.to_json()), file=file if file is not None else sys.stderr)

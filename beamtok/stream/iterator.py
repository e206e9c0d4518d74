"""DatasetIterator: the live stream of a Dataset, with a versioned, strict JSON state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from beamtok.errors import StateError
from beamtok.stream.node import Node
from beamtok.stream.split import ReaderSplit
from beamtok.stream.state import check_keys, copy_state

if TYPE_CHECKING:
    from beamtok.stream.dataset import Dataset

__all__ = ["STATE_VERSION", "DatasetIterator"]

STATE_VERSION = 1


class DatasetIterator:
    """Iterates a Dataset; ``state_dict()`` at any point resumes exactly there.

    The state is JSON: the state format version, the spec and stream fingerprints, which part
    of the data this reader owns, and the positions of the stages. It holds no token data.
    Nothing is read and no worker process starts before the first ``next()``; as a context
    manager it stops its workers on exit.
    """

    KEYS = ("beamtok_state", "spec", "stream", "split", "pipeline")

    def __init__(self, dataset: Dataset, split: ReaderSplit, state: dict[str, Any] | None = None) -> None:
        self.dataset = dataset
        self.split = split
        self._spec_fp = dataset.spec_fingerprint
        self._stream_fp = dataset.stream_fingerprint
        self._source, self._root = dataset._build(split)  # the root source, and the last stage
        self._root.reset(self._check(state)["pipeline"] if state is not None else None)

    def _check(self, state: Any) -> dict[str, Any]:
        state = copy_state(state)
        if not isinstance(state, dict) or "beamtok_state" not in state:
            raise StateError("not a beamtok state: it has no 'beamtok_state' version key")
        if state["beamtok_state"] != STATE_VERSION:
            raise StateError(
                f"state format version {state['beamtok_state']!r} is not supported (this beamtok reads version {STATE_VERSION})"
            )
        check_keys(state, self.KEYS, "state")
        if state["spec"] != self._spec_fp:
            raise StateError(
                f"state was saved by a pipeline with spec fingerprint {state['spec']}, but this "
                f"pipeline's is {self._spec_fp}: tokenizer, fields, packing or error policy differ"
            )
        if state["stream"] != self._stream_fp:
            raise StateError(
                f"state was saved by a stream with fingerprint {state['stream']}, but this one's is "
                f"{self._stream_fp}: the shard list, rank split, shuffle, batch or other stream stages differ"
            )
        if state["split"] != self.split.to_json():
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
        return next(self._root)

    def state_dict(self) -> dict[str, Any]:
        """Where the stream is now, as a JSON-serializable dict."""
        return {
            "beamtok_state": STATE_VERSION,
            "spec": self._spec_fp,
            "stream": self._stream_fp,
            "split": self.split.to_json(),
            "pipeline": self._root.state_dict(),
        }

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

    def stats(self) -> dict[str, Any]:
        """Documents read, emitted, skipped (by reason) and truncated; examples, tokens, pad
        tokens and padding waste (pad / all tokens); the epoch (for a mix: each source's
        stats and epoch, and the realised proportions). Counts cover what the source has
        handed downstream (a shuffle window reads ahead of the consumer)."""
        stats = self._source.stats_json()
        total = stats["tokens"] + stats["pad_tokens"]
        stats["padding_waste"] = stats["pad_tokens"] / total if total else 0.0
        return stats

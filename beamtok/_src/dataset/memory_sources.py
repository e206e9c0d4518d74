"""Datasets of data in memory: a sequence of strings or records, or a re-iterable source."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from beamtok._src.core.spec import SourceSpec, Spec
from beamtok._src.dataset.stage_adding import D, of_shards
from beamtok._src.sources.memory import iterable_shard, sequence_shards

__all__ = ["from_iterable", "from_sequence", "memory_spec"]


def memory_spec(text_field: str, on_error: str) -> Spec:
    """The shard processing of data read from memory, before any step.

    Args:
        text_field: The field holding the text in dicts.
        on_error: ``"raise"`` or ``"skip"``.
    """
    return Spec(SourceSpec("memory", text_field), on_error=on_error)  # type: ignore[arg-type]


def from_sequence(
    cls: type[D],
    data: Sequence[Any] | Sequence[Sequence[Any]],
    *,
    text_field: str = "text",
    shards: int = 1,
    on_error: str = "raise",
) -> D:
    """Read an in-memory sequence of strings or dicts (a list, a ``datasets.Dataset``...).

    ``shards`` > 1 splits it into that many contiguous shards.

    Args:
        data: Strings or dicts, in order.
        text_field: The field holding the text in dicts.
        shards: Contiguous shards to cut it into.
        on_error: ``"raise"`` (a bad record stops the stream, naming its file and line or row) or
            ``"skip"`` (skipped and counted).
    Returns:
        A new Dataset.
    """
    return of_shards(cls, sequence_shards(data, shards), memory_spec(text_field, on_error))


def from_iterable(
    cls: type[D],
    source: Iterable[Any] | Callable[[], Iterable[Any]],
    *,
    text_field: str = "text",
    on_error: str = "raise",
) -> D:
    """Read a re-iterable object, or a function returning a fresh iterable, as one shard.

    Resuming skips the items before the cursor, so a one-shot iterator (a generator) is
    refused: pass a function that creates it instead.

    Args:
        source: A re-iterable object, or a function returning a fresh iterable each call.
        text_field: The field holding the text in dicts.
        on_error: ``"raise"`` (a bad record stops the stream, naming its file and line or row) or
            ``"skip"`` (skipped and counted).
    Returns:
        A new Dataset.
    Raises:
        ConfigError: ``source`` is a one-shot iterator.
    """
    shard = iterable_shard(source)
    spec = memory_spec(text_field, on_error)
    return of_shards(cls, [shard], spec)

"""Test helpers shipped with beamtok, for our tests and for users' own stages.

``check_resumption(make_dataset)`` proves a pipeline resumes exactly: for each chosen step k
it iterates k items, saves the state, passes it through ``json.dumps``/``json.loads`` into a
freshly built dataset, and checks the remainder equals the uninterrupted run from k on, and
that the resumed run ends with the same ``stats()`` as the uninterrupted one.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ResumptionReport", "assert_items_equal", "check_equivalent", "check_resumption", "items_equal"]


@dataclass
class ResumptionReport:
    """What check_resumption checked."""

    total_items: int
    steps_checked: list[int]
    max_state_bytes: int


def items_equal(a: Any, b: Any) -> bool:
    """Deep equality for examples and batches: dicts, tuples, lists, numpy arrays, tensors."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(items_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(items_equal(x, y) for x, y in zip(a, b))
    if hasattr(a, "numpy") and hasattr(b, "numpy") and not isinstance(a, np.ndarray):
        a, b = a.numpy(), b.numpy()
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    return bool(a == b) and type(a) is type(b)


def assert_items_equal(got: list[Any], want: list[Any], context: str = "") -> None:
    """Assert two item lists are equal, naming the first position that differs."""
    for i, (g, w) in enumerate(zip(got, want)):
        if not items_equal(g, w):
            raise AssertionError(f"{context}item {i} differs:\n got {_brief(g)}\nwant {_brief(w)}")
    if len(got) != len(want):
        raise AssertionError(f"{context}got {len(got)} items, want {len(want)}")


def check_resumption(
    make_dataset: Callable[[], Any],
    *,
    steps: Iterable[int] | None = None,
    random_steps: int = 0,
    seed: int = 0,
    limit: int | None = None,
    resume_dataset: Callable[[], Any] | None = None,
) -> ResumptionReport:
    """Check that resuming at each step yields exactly the uninterrupted remainder.

    ``steps`` defaults to every step of the run (use ``random_steps`` on long runs to check a
    seeded random sample plus the first and last step). ``resume_dataset`` builds the dataset
    the state is restored into (default: ``make_dataset``), for checks across modes. ``limit``
    caps how many items the reference run takes.
    """
    reference = make_dataset().iter()
    full = list(itertools.islice(reference, limit))
    final_stats = _stats_of(reference)
    n = len(full)
    if steps is None:
        if random_steps:
            rng = random.Random(seed)
            steps = sorted({0, n, *(rng.randint(0, n) for _ in range(random_steps))})
        else:
            steps = range(n + 1)
    checked: list[int] = []
    max_bytes = 0
    for k in steps:
        it = make_dataset().iter()
        head = list(itertools.islice(it, k))
        assert_items_equal(head, full[:k], f"step {k}, before the checkpoint: ")
        state = it.state_dict()
        blob = json.dumps(state)
        max_bytes = max(max_bytes, len(blob))
        restored_state = json.loads(blob)
        pristine = copy.deepcopy(restored_state)
        resumed = (resume_dataset or make_dataset)().iter(state_dict=restored_state)
        if restored_state != pristine:
            raise AssertionError(f"step {k}: iter(state_dict=...) mutated the state it was given")
        rest = list(itertools.islice(resumed, None if limit is None else n - k))
        assert_items_equal(rest, full[k:], f"step {k}, after resuming: ")
        resumed_stats = _stats_of(resumed)
        if resumed_stats != final_stats:
            raise AssertionError(f"step {k}: stats() at the end differ after resuming:\n got {resumed_stats}\nwant {final_stats}")
        checked.append(k)
    return ResumptionReport(n, checked, max_bytes)


def check_equivalent(make_a: Callable[[], Any], make_b: Callable[[], Any], *, random_steps: int = 8, seed: int = 0) -> None:
    """Check two pipelines are one stream (e.g. on the fly and from a cache): the same spec
    fingerprint, the same items, the same ``stats()`` at the end, and states taken at seeded
    random steps of either one resume the other exactly."""
    if make_a().spec_fingerprint != make_b().spec_fingerprint:
        raise AssertionError(f"spec fingerprints differ: {make_a().spec_fingerprint} vs {make_b().spec_fingerprint}")
    a, b = make_a().iter(), make_b().iter()
    assert_items_equal(list(b), list(a), "second pipeline: ")
    if _stats_of(a) != _stats_of(b):
        raise AssertionError(f"stats() at the end differ:\n{_stats_of(a)}\n{_stats_of(b)}")
    check_resumption(make_a, random_steps=random_steps, seed=seed, resume_dataset=make_b)
    check_resumption(make_b, random_steps=random_steps, seed=seed + 1, resume_dataset=make_a)


def _stats_of(iterator: Any) -> Any:
    stats = getattr(iterator, "stats", None)
    return stats() if stats is not None else None


def _brief(item: Any) -> str:
    text = repr(item)
    return text if len(text) < 400 else text[:400] + "..."

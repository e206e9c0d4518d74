"""beamtok.testing.check_resumption fails where resuming is not exact: a state that restores
the wrong place, a state whose taking changes the run, and one that ``iter`` mutates."""

from __future__ import annotations

from typing import Any

import pytest

from beamtok.testing import check_resumption


class Counting:
    """The numbers 0..n-1 as a resumable stream, with a bug chosen by name."""

    def __init__(self, n: int = 30, bug: str = "") -> None:
        self.n, self.bug = n, bug

    def iter(self, state_dict: dict[str, Any] | None = None) -> CountingIterator:
        return CountingIterator(self, state_dict)


class CountingIterator:
    def __init__(self, dataset: Counting, state: dict[str, Any] | None) -> None:
        self.dataset, self.at = dataset, 0
        if state is not None:
            self.at = state["at"] + (dataset.bug == "restores one on" and state["at"] == 17)
            if dataset.bug == "mutates the state":
                state["at"] = -1

    def __iter__(self) -> CountingIterator:
        return self

    def __next__(self) -> int:
        if self.at >= self.dataset.n:
            raise StopIteration
        self.at += 1
        return self.at - 1

    def state_dict(self) -> dict[str, Any]:
        state = {"at": self.at}
        if self.dataset.bug == "taking a state skips an item":
            self.at += 1
        return state


def test_an_exact_stream_passes_at_every_step():
    report = check_resumption(lambda: Counting())
    assert (report.total_items, report.steps_checked) == (30, list(range(31)))


@pytest.mark.parametrize(
    ("bug", "message"),
    [
        ("restores one on", "step 17, after resuming"),
        ("taking a state skips an item", "the run taking states"),
        ("mutates the state", "mutated the state"),
    ],
)
def test_a_stream_that_does_not_resume_exactly_fails(bug, message):
    with pytest.raises(AssertionError, match=message):
        check_resumption(lambda: Counting(bug=bug))

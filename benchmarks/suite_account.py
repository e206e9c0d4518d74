"""A pytest plugin for ``benchmarks/suite_time.py``: each test's wall time and CPU, one JSON line a test.

Loaded with ``-p suite_account`` (``benchmarks/`` on ``PYTHONPATH``); writes to the file named by
``SUITE_ACCOUNT``, appending, so every xdist worker writes its own tests' lines. The CPU is the
worker's own (``RUSAGE_SELF``) and that of the subprocesses it reaped during the test
(``RUSAGE_CHILDREN``); a process the test left to someone else to reap (a JVM, a cluster's
workers) is not counted, which is why the suite's total is also measured around pytest as a whole.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from typing import Any

import pytest


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
    own, reaped, started = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    yield
    record = {
        "test": item.nodeid,
        "wall_s": time.perf_counter() - started,
        "cpu_self_s": _cpu(resource.RUSAGE_SELF) - own,
        "cpu_children_s": _cpu(resource.RUSAGE_CHILDREN) - reaped,
    }
    path = os.environ.get("SUITE_ACCOUNT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")

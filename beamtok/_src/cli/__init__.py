"""The ``beamtok`` command line: one module per command, each registering itself on ``main``."""

from beamtok._src.cli import cache, demo, head, inspect, stats, verify  # noqa: F401 - each registers its command
from beamtok._src.cli.app import main

__all__ = ["main"]

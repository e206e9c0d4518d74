"""``python -m beamtok._src.cli``."""

from beamtok._src.cli import main

main()

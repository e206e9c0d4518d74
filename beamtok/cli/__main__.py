"""``python -m beamtok.cli``."""

from beamtok.cli import main

main()

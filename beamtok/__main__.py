"""``python -m beamtok``: the ``beamtok`` command."""

from beamtok._src.cli import main

if __name__ == "__main__":
    main()

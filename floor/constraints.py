"""Print pip constraints pinning each core dependency to the minimum ``pyproject.toml``
declares (``name>=X`` -> ``name==X``), for the floor environment of ``make floor``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

CORE = ("numpy", "pyarrow", "tokenizers", "transformers")


def floors(pyproject: str) -> dict[str, str]:
    """The declared minimum of each core dependency, read from the project's dependency list."""
    block = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.S | re.M)
    if block is None:
        raise SystemExit("pyproject.toml: no dependencies list")
    found = {}
    for name, version in re.findall(r'"([A-Za-z0-9_.-]+)>=([0-9][0-9.]*)', block.group(1)):
        if name in CORE:
            found[name] = version
    missing = sorted(set(CORE) - set(found))
    if missing:
        raise SystemExit(f"pyproject.toml: no minimum declared for {', '.join(missing)}")
    return found


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    for name, version in sorted(floors((root / "pyproject.toml").read_text()).items()):
        sys.stdout.write(f"{name}=={version}\n")

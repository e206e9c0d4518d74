"""numba's kernel cache is dropped when any compiled module's source changes: numba itself
keys a kernel on its own file, so a kernel calling a changed helper from another file ran
the helper as it was (found by hand, a planted bug kept passing after it was removed)."""

from __future__ import annotations

import shutil
from pathlib import Path

from beamtok._src.engines import kernel_cache
from beamtok._src.engines.kernel_cache import COMPILED_MODULES, drop_stale_kernels

PACKAGE = Path(kernel_cache.__file__).parent


def _package(tmp_path: Path) -> Path:
    """A copy of the compiled modules' sources, with a cached kernel of each and of another module."""
    package = tmp_path / "transforms"
    (package / "__pycache__").mkdir(parents=True)
    for name in COMPILED_MODULES:
        shutil.copy(PACKAGE / f"{name}.py", package / f"{name}.py")
        for suffix in ("nbi", "nbc"):
            (package / "__pycache__" / f"{name}.kernel-12.py311.{suffix}").write_bytes(b"compiled")
    (package / "__pycache__" / "other.kernel-3.py311.nbi").write_bytes(b"compiled")
    return package


def _cached(package: Path) -> list[str]:
    return sorted(p.name for p in (package / "__pycache__").glob("*.nb[ic]"))


def test_a_change_to_any_compiled_module_drops_every_compiled_modules_kernels(tmp_path):
    package = _package(tmp_path)
    assert drop_stale_kernels(package)  # no digest yet: nothing cached can be trusted
    assert _cached(package) == ["other.kernel-3.py311.nbi"]
    for name in COMPILED_MODULES:
        (package / "__pycache__" / f"{name}.kernel-12.py311.nbi").write_bytes(b"compiled again")
    assert not drop_stale_kernels(package)  # the same sources: kept
    assert len(_cached(package)) == len(COMPILED_MODULES) + 1
    helper = package / "compiled_tables.py"
    helper.write_text(helper.read_text(encoding="utf-8") + "\n# a helper changed\n", encoding="utf-8")
    assert drop_stale_kernels(package)
    assert _cached(package) == ["other.kernel-3.py311.nbi"]  # the kernels calling it too, not another module's


def test_where_the_cache_cannot_be_written_nothing_is_raised(tmp_path):
    """An install whose ``__pycache__`` cannot be made (a file stands there) imports as ever."""
    package = _package(tmp_path)
    shutil.rmtree(package / "__pycache__")
    (package / "__pycache__").write_bytes(b"not a directory")
    assert not drop_stale_kernels(package)


def test_sources_that_are_not_on_disk_leave_everything_as_it_is(tmp_path):
    """Modules imported from a zip have no files to read: nothing is dropped, nothing raised."""
    package = _package(tmp_path)
    (package / "bpe_native.py").unlink()
    before = _cached(package)
    assert not drop_stale_kernels(package)
    assert _cached(package) == before

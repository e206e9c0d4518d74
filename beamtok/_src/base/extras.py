"""Optional dependencies: each named with the extra that installs it, checked when a feature
that needs it is asked for (not when it first runs), so a missing one is one line saying what
to install instead of a ``ModuleNotFoundError`` deep in a traceback."""

from __future__ import annotations

import importlib.util

from beamtok._src.base.errors import ConfigError

__all__ = ["EXTRAS", "missing_extra", "require"]

EXTRAS = {  # module -> the beamtok extra that installs it
    "apache_beam": "beam",
    "torch": "torch",
    "torchdata": "torch",
    "accelerate": "trainer",
    "datasets": "hf",
    "matplotlib": "plot",
    "jax": "jax",
    "orbax": "jax",
}
NAMES = {
    "apache_beam": "Apache Beam",
    "torch": "PyTorch",
    "torchdata": "torchdata",
    "accelerate": "accelerate",
    "datasets": "Hugging Face datasets",
    "matplotlib": "matplotlib",
    "jax": "JAX",
    "orbax": "orbax-checkpoint",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that cannot be imported, or a module blocked in sys.modules
        return False


def missing_extra(what: str, *modules: str) -> str | None:
    """The message for ``what`` when one of ``modules`` is not installed, else None."""
    for module in modules:
        if not _installed(module):
            extra = EXTRAS[module]
            return f"{what} needs {NAMES[module]}: pip install 'beamtok[{extra}]'"
    return None


def require(what: str, *modules: str) -> None:
    """Raise a ConfigError naming the extra to install when one of ``modules`` is missing."""
    message = missing_extra(what, *modules)
    if message is not None:
        raise ConfigError(message)

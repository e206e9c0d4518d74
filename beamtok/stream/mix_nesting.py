"""A mix of mixes as one mix of their sources, each weighted by its share.

``Dataset.mix([Dataset.mix([a, b], [3, 1]), c], [4, 1])`` mixes ``a``, ``b`` and ``c`` at
3 : 1 : 1: a leaf's weight is its weight over its mix's total, times that mix's weight.
Only mixes of constant weights that never stop nest: a schedule or a stop rule of an inner mix
has no meaning once its sources join the outer one.
"""

from __future__ import annotations

from typing import Any

from beamtok.base.errors import ConfigError
from beamtok.stream.roots.mix import MixRoot

__all__ = ["flattened_mixes"]


def flattened_mixes(roots: list[Any], weights: Any, max_epochs: Any) -> tuple[list[Any], list[float], list[int | None]]:
    """A mix of mixes as one mix of their sources: each inner source weighted by its share of
    its mix times that mix's weight, caps carried over. Inner mixes must have constant
    weights and stop='never' (a schedule or stop rule has no meaning once flattened)."""
    if weights is not None and weights and isinstance(weights[0], (tuple, list)):
        raise ConfigError("a mix of mixes takes constant weights, not a schedule")
    outer = [1.0] * len(roots) if weights is None else list(weights)
    if len(outer) != len(roots):
        raise ConfigError(f"{len(outer)} weights for {len(roots)} sources")
    caps = [max_epochs] * len(roots) if not isinstance(max_epochs, (list, tuple)) else list(max_epochs)
    if len(caps) != len(roots):
        raise ConfigError(f"{len(caps)} max_epochs for {len(roots)} sources")
    leaves: list[Any] = []
    leaf_weights: list[float] = []
    leaf_caps: list[int | None] = []
    for i, (root, w, cap) in enumerate(zip(roots, outer, caps)):
        if not isinstance(w, (int, float)) or isinstance(w, bool) or not 0 <= w < float("inf"):
            raise ConfigError(f"weights must be finite, non-negative numbers, got {w!r}")
        if not isinstance(root, MixRoot):
            leaves.append(root)
            leaf_weights.append(float(w))
            leaf_caps.append(cap)
            continue
        inner = root.plan
        if len(inner.schedule) != 1 or inner.stop != "never":
            raise ConfigError(f"mix source {i} is a mix with a weight schedule or stop={inner.stop!r}: only mixes of constant weights that never stop nest")
        inner_weights = inner.schedule[0][1]
        total = sum(inner_weights)
        inner_caps = inner.max_epochs or (None,) * len(root.mixed)
        for leaf, lw, lcap in zip(root.mixed, inner_weights, inner_caps):
            leaves.append(leaf)
            leaf_weights.append(float(w) * lw / total)
            leaf_caps.append(lcap if cap is None else cap if lcap is None else min(cap, lcap))
    return leaves, leaf_weights, leaf_caps


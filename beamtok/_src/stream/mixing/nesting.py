"""A mix of mixes: nested, or flattened into one mix of their sources where that is exact.

Nested, a mixed mix is one source of the outer mix: each position the outer mix draws for it
takes the inner mix's next example, and the inner mix keeps its own rule (weights or a
schedule, seed, stop rule, caps). Flattened, ``Dataset.mix([Dataset.mix([a, b], [3, 1]), c],
[4, 1])`` is one mix of ``a``, ``b`` and ``c`` at 3 : 1 : 1: a leaf's weight is its weight
over its mix's total, times that mix's weight. Both give each source the same share; the
flat mix holds each leaf's exact count in every block (the nested one holds each inner mix's
count, then its leaves' counts in the inner mix's own blocks) and numbers its leaves in
``source``. Only inner mixes of constant weights that never stop flatten (a schedule or stop
rule has no meaning once their sources join the outer mix), and only under constant outer
weights; ``flatten=None`` flattens those and nests the rest.
"""

from __future__ import annotations

from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.stream.mixing.mix_plan import checked_weights
from beamtok._src.stream.roots.mix import MixRoot

__all__ = ["flattened_mixes"]


def flattens(root: Any) -> bool:
    """Whether ``root`` is a mix of constant weights that never stops (it may cap sources)."""
    return isinstance(root, MixRoot) and len(root.plan.schedule) == 1 and root.plan.stop == "never"


def flattened_mixes(roots: list[Any], weights: Any, max_epochs: Any, *, required: bool) -> tuple[list[Any], Any, Any]:
    """The outer mix's roots, weights and caps with each inner mix that can be flattened
    replaced by its sources (weighted by their share of it times its weight, caps carried
    over); ``required``: every inner mix must flatten (else a ConfigError names it).
    Returns the arguments unchanged when nothing flattens."""
    schedule = weights is not None and weights and isinstance(weights[0], (tuple, list))
    if required:
        for i, root in enumerate(roots):
            if isinstance(root, MixRoot) and schedule:
                raise ConfigError("flatten=True: a mix of mixes flattens under constant weights, not a schedule")
            if isinstance(root, MixRoot) and not flattens(root):
                raise ConfigError(
                    f"flatten=True: mix source {i} is a mix with a weight schedule or stop={root.plan.stop!r}: only mixes of constant weights that never stop flatten"
                )
    if schedule or not any(flattens(root) for root in roots):
        return roots, weights, max_epochs
    outer = checked_weights([1.0] * len(roots) if weights is None else list(weights), len(roots))
    caps = [max_epochs] * len(roots) if not isinstance(max_epochs, (list, tuple)) else list(max_epochs)
    if len(caps) != len(roots):
        raise ConfigError(f"{len(caps)} max_epochs for {len(roots)} sources")
    leaves: list[Any] = []
    leaf_weights: list[float] = []
    leaf_caps: list[int | None] = []
    for root, w, cap in zip(roots, outer, caps):
        if not flattens(root):
            leaves.append(root)
            leaf_weights.append(float(w))
            leaf_caps.append(cap)
            continue
        inner = root.plan
        inner_weights = inner.schedule[0][1]
        total = sum(inner_weights)
        inner_caps = inner.max_epochs or (None,) * len(root.mixed)
        for leaf, lw, lcap in zip(root.mixed, inner_weights, inner_caps):
            leaves.append(leaf)
            leaf_weights.append(float(w) * lw / total)
            leaf_caps.append(lcap if cap is None else cap if lcap is None else min(cap, lcap))
    return leaves, leaf_weights, leaf_caps if any(c is not None for c in leaf_caps) else None

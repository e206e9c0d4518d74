"""Histograms of what ``beamtok stats`` gathered, as one PNG (``pip install 'beamtok[plot]'``)."""

from __future__ import annotations

from typing import Any

from beamtok._src.base.errors import ConfigError
from beamtok._src.base.extras import require
from beamtok._src.cli.data_stats import DataStats

__all__ = ["plot_stats"]


def plot_stats(gathered: DataStats, path: str, title: str) -> list[str]:
    """Write histograms of document lengths, row fill and (SFT) prompt/completion lengths to
    ``path``; return the names of the panels drawn."""
    require("--plot", "matplotlib")
    import matplotlib

    matplotlib.use("Agg")  # headless: no display is needed or opened
    import matplotlib.pyplot as plt

    panels: list[tuple[str, Any, str]] = []
    if gathered.document_tokens:
        panels.append(("document length (tokens)", gathered.document_tokens, "documents"))
    if len(gathered.row_lengths) == 1 and gathered.row_fill:
        panels.append(("row fill (real tokens / row length)", gathered.row_fill, "rows"))
    if gathered.sft and gathered.prompt_tokens:
        panels.append(("prompt tokens per example", gathered.prompt_tokens, "examples"))
        panels.append(("completion tokens per example", gathered.completion_tokens, "examples"))
    if not panels:
        raise ConfigError("nothing to plot: no examples were read")
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for axis, (name, values, unit) in zip(axes[0], panels):
        axis.hist(values, bins=50, color="#3b6ea5")
        axis.set_title(name, fontsize=10)
        axis.set_ylabel(unit)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=100)
    except OSError as e:
        raise ConfigError(f"{path}: cannot write the plot: {e.strerror}") from None
    finally:
        plt.close(figure)
    return [name for name, _, _ in panels]

"""Progress of long jobs (cache builds, verification): a tqdm bar on a terminal, plain lines
elsewhere.

On a terminal the bar redraws in place. When stderr is a file, a pipe or a notebook cell, a
bar would print a line per redraw, so one plain line is written every ``interval`` seconds
instead, and one at the end.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

__all__ = ["Progress"]


class Progress:
    """Progress toward ``total`` units; ``set(done, **figures)`` updates it.

    ``figures`` are shown beside the count (``tokens=1.2M``). Disabled, it does nothing.
    """

    REDRAW = 0.1  # seconds between redraws: set() may be called for every row

    def __init__(
        self,
        total: float,
        description: str,
        unit: str,
        *,
        enabled: bool = True,
        stream: IO[str] | None = None,
        interval: float = 10.0,
    ) -> None:
        self.total = total
        self.description = description
        self.unit = unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.started = time.monotonic()
        self._last_line = self.started
        self._last_draw = 0.0
        self._done: float = 0
        self._figures: dict[str, Any] = {}
        self._bar: Any = None
        if enabled and _is_terminal(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=description, unit=unit, file=self.stream, dynamic_ncols=True, leave=True)

    def set(self, done: float, **figures: Any) -> None:
        """``done`` units of ``total`` are finished; ``figures`` replace the shown figures."""
        if not self.enabled:
            return
        self._done = done
        self._figures = figures
        now = time.monotonic()
        if now - self._last_draw < self.REDRAW:
            return
        self._last_draw = now
        if self._bar is not None:
            self._bar.n = done
            self._bar.set_postfix_str(_figures(figures), refresh=False)
            self._bar.refresh()
        elif time.monotonic() - self._last_line >= self.interval:
            self._line()

    def close(self) -> None:
        """Show the final figures once."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.n = self._done
            self._bar.set_postfix_str(_figures(self._figures), refresh=False)
            self._bar.close()
            self._bar = None
        else:
            self._line()
        self.enabled = False

    def _line(self) -> None:
        self._last_line = time.monotonic()
        elapsed = self._last_line - self.started
        fraction = self._done / self.total if self.total else 1.0
        eta = f", about {_duration(elapsed * (1 - fraction) / fraction)} left" if 0 < fraction < 1 else ""
        done = f"{self._done:.1f}" if self._done != int(self._done) else f"{int(self._done)}"
        figures = f", {_figures(self._figures)}" if self._figures else ""
        print(
            f"beamtok: {self.description}: {done}/{_count(self.total)} {self.unit} ({fraction:.0%}){figures}, {_duration(elapsed)}{eta}",
            file=self.stream,
            flush=True,
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _figures(figures: dict[str, Any]) -> str:
    return ", ".join(f"{name} {value}" for name, value in figures.items())


def _count(value: float) -> str:
    return f"{int(value)}" if value == int(value) else f"{value:.1f}"


def _duration(elapsed: float) -> str:
    seconds = max(0, round(elapsed))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"

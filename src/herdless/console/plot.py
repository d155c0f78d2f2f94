"""Where the lines of a lag-over-time plot go: the geometry an SVG template draws.

Drawn on the server, so a page needs no plotting library and no script to show it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Tick:
    at: float  # pixels along its axis
    label: str


@dataclass(frozen=True, slots=True)
class Plot:
    width: int
    height: int
    # The plotting area inside the margins that hold the labels.
    left: float
    top: float
    right: float
    bottom: float
    points: tuple[tuple[float, float], ...]  # one per sample, oldest first
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]

    @property
    def polyline(self) -> str:
        return " ".join(f"{x:.1f},{y:.1f}" for x, y in self.points)

    @property
    def area(self) -> str:
        """The polyline closed along the bottom, for the shading under it."""
        if not self.points:
            return ""
        first, last = self.points[0][0], self.points[-1][0]
        return f"{first:.1f},{self.bottom:.1f} {self.polyline} {last:.1f},{self.bottom:.1f}"


def lag_plot(
    samples: Sequence[tuple[float, int]],
    width: int = 720,
    height: int = 220,
    labels: bool = True,
) -> Plot:
    """Samples of (seconds since the epoch, lag); without labels, a sparkline."""
    left, top = (56.0, 10.0) if labels else (1.0, 2.0)
    right, bottom = (width - 12.0, height - 24.0) if labels else (width - 1.0, height - 2.0)
    highest = nice_ceiling(max((lag for _, lag in samples), default=0))
    first = samples[0][0] if samples else 0.0
    span = (samples[-1][0] - first) if len(samples) > 1 else 0.0

    def x(t: float) -> float:
        return right if span == 0 else left + (t - first) / span * (right - left)

    def y(lag: float) -> float:
        return bottom - lag / highest * (bottom - top)

    points = tuple((x(t), y(lag)) for t, lag in samples)
    y_ticks = x_ticks = ()
    if labels:
        y_ticks = tuple(Tick(y(v), f"{v:,}") for v in dict.fromkeys((0, highest // 2, highest)))
        if samples:
            times = dict.fromkeys((first, first + span / 2, first + span))
            x_ticks = tuple(Tick(x(t), _clock(t)) for t in times)
    return Plot(width, height, left, top, right, bottom, points, y_ticks, x_ticks)


def nice_ceiling(value: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50... at or above `value`: round axis labels."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return int(step * power)
    raise AssertionError("unreachable: 10 * power >= value")


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t))


@dataclass(frozen=True, slots=True)
class Span:
    x: float
    width: float
    cause: str
    title: str


@dataclass(frozen=True, slots=True)
class Strip:
    """Rebalances along a time axis, each as wide as it took (at least a sliver)."""

    width: int
    height: int
    spans: tuple[Span, ...]
    ticks: tuple[Tick, ...]


def rebalance_strip(
    entries: Sequence[dict[str, object]], now_ms: int, width: int = 720, height: int = 40
) -> Strip:
    """Entries of `__rebalance_history` (started_ms, ended_ms, cause) on one time axis
    from the first of them to now."""
    timed = [e for e in entries if isinstance(e.get("ended_ms"), int)]
    if not timed:
        return Strip(width, height, (), ())
    ends = [int(e["ended_ms"]) for e in timed]  # type: ignore[call-overload]
    starts = [_started_ms(e, end) for e, end in zip(timed, ends, strict=True)]
    first, last = min(starts), max(*ends, now_ms)
    span = max(last - first, 1)
    left, right = 4.0, width - 4.0

    def x(ms: int) -> float:
        return left + (ms - first) / span * (right - left)

    spans = tuple(
        Span(
            x(start),
            max(x(end) - x(start), 3.0),
            str(e.get("cause", "?")),
            f"{e.get('cause', '?')}: {_clock(end / 1000)} UTC, took {end - start} ms",
        )
        for e, start, end in zip(timed, starts, ends, strict=True)
    )
    ticks = tuple(Tick(x(ms), _clock(ms / 1000)) for ms in dict.fromkeys((first, last)))
    return Strip(width, height, spans, ticks)


def _started_ms(entry: dict[str, object], ended_ms: int) -> int:
    started = entry.get("started_ms")
    return started if isinstance(started, int) and started <= ended_ms else ended_ms

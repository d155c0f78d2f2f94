"""The broker's two clocks (herdless/clock.py reads them and says which serves what):
the broker owns time, the layers below take it as an argument.

Each caller names the one it means; `now` reads both for the coordinator, which
needs both in one operation (coordinator/now.py).
"""

from herdless.clock import monotonic_ms, wall_ms
from herdless.coordinator.now import Now

__all__ = ["monotonic_ms", "now", "wall_ms"]


def now() -> Now:
    return Now(wall_ms(), monotonic_ms())

"""Kafka's windowed rate and the throttle time it gives, with the clock passed in.

A rate is measured over `quota.window.num` samples of `quota.window.size.seconds` each,
as Kafka's Rate over a SampledStat: each sample sums what was recorded while it was
current, a sample idle for the whole window is forgotten, and the time the rate is
divided by counts at least `samples - 1` whole windows, so a client that has just begun
is not measured over a second and throttled at once for a burst.

The throttle time is Kafka's QuotaUtils.throttleTime: with O the observed rate, T the
quota and W that window, waiting X with nothing more recorded brings the rate down to
the quota when O * W / (W + X) = T, so X = (O - T) / T * W.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kafka's defaults: quota.window.num and quota.window.size.seconds.
DEFAULT_SAMPLES = 11
DEFAULT_WINDOW_MS = 1000


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


class SampledRate:
    """A per-second rate over `samples` windows of `window_ms` (Kafka's Rate, SampledStat)."""

    def __init__(
        self, now_ms: int, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS
    ) -> None:
        if samples < 2 or window_ms < 1:
            raise ValueError("a rate needs at least two samples of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        # One more than `samples`: the oldest may overlap the window's start.
        self._ring = [_Sample(now_ms, now_ms)]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._ring[self._current]
        if now_ms >= sample.start_ms + self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """The rate per second now."""
        self._purge(now_ms)
        total = sum(sample.value for sample in self._ring)
        return total * 1000.0 / self.window_size_ms(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is divided by (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        elapsed = now_ms - min(sample.start_ms for sample in self._ring)
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1)

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._ring):
            self._ring.append(_Sample(now_ms, now_ms))
        else:
            self._ring[self._current].reset(now_ms)
        return self._ring[self._current]

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.samples * self.window_ms
        for sample in self._ring:
            if now_ms - sample.last_event_ms >= expire_ms:
                sample.reset(now_ms)


def throttle_time_ms(rate: SampledRate, bound: float, now_ms: int) -> int:
    """How long the client must wait for `rate` to come back to `bound`; 0 within it."""
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    if bound <= 0:
        # A quota of nothing: wait out the whole measured window.
        return rate.samples * rate.window_ms
    return round((observed - bound) / bound * rate.window_size_ms(now_ms))

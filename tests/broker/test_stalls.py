"""The stall detector: a jump of the monotonic clock between two looks is a stall."""

from __future__ import annotations

from herdless.broker.stalls import STALL_THRESHOLD_S, TICK_S, StallDetector


def test_a_gap_beyond_the_threshold_is_reported_once_ordinary_lag_is_not() -> None:
    now = [100.0]
    detector = StallDetector(lambda: now[0])
    stalls: list[int] = []
    detector.listeners.append(stalls.append)
    now[0] += TICK_S + STALL_THRESHOLD_S / 2  # a busy loop, not a stall
    detector.observe()
    now[0] += TICK_S + 12.5  # paused for 12.5 s
    detector.observe()
    detector.observe()  # the same stall is not counted twice
    assert stalls == [12_500]
    assert detector.stalled_ms_total == 12_500

"""Kafka's windowed rate and throttle time, on a fake clock: the figures Kafka's
RateTest, QuotaUtilsTest and ClientQuotaManagerTest expect."""

from __future__ import annotations

import pytest

from herdless.broker.quotas.rate import SampledRate, throttle_time_ms


def test_a_new_rate_is_measured_over_all_but_one_window() -> None:
    # 1 s in: the rate counts 10 whole windows, not 1, so a first burst is not a peak.
    rate = SampledRate(0, samples=11, window_ms=1000)
    rate.record(1000, 0)
    assert rate.window_size_ms(1000) == 10_000
    assert rate.measure(1000) == pytest.approx(100)
    # 12.5 s in, with a record each second: the oldest kept began at 2 s (11 samples
    # and the current one are kept).
    for second in range(1, 13):
        rate.record(1000, second * 1000)
    assert rate.window_size_ms(12_500) == 10_500


def test_a_steady_rate_is_measured_as_it_is() -> None:
    rate = SampledRate(0, samples=11, window_ms=1000)
    for second in range(30):
        rate.record(500, second * 1000)
    assert rate.measure(30_000) == pytest.approx(500, rel=0.1)


def test_samples_idle_for_the_whole_window_are_forgotten() -> None:
    rate = SampledRate(0, samples=3, window_ms=1000)
    rate.record(9000, 0)
    assert rate.measure(2500) > 0
    assert rate.measure(3000) == 0


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    # O = 2 T over W = 10 s: waiting (O - T) / T * W = 10 s halves it.
    rate = SampledRate(0, samples=11, window_ms=1000)
    rate.record(20_000, 0)
    assert rate.measure(0) == pytest.approx(2000)
    assert throttle_time_ms(rate, 1000, 0) == 10_000


def test_no_throttle_within_the_quota() -> None:
    rate = SampledRate(0, samples=11, window_ms=1000)
    rate.record(10_000, 0)
    assert throttle_time_ms(rate, 1000, 500) == 0


def test_a_taken_back_record_leaves_the_rate_as_before() -> None:
    rate = SampledRate(0)
    rate.record(100, 0)
    before = rate.measure(10)
    rate.record(5000, 10)
    rate.record(-5000, 10)
    assert rate.measure(10) == before


def test_a_rate_needs_two_samples() -> None:
    with pytest.raises(ValueError, match="two samples"):
        SampledRate(0, samples=1)

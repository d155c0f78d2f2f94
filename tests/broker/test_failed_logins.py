"""Failed logins per address, on a fake clock."""

from __future__ import annotations

import pytest

from herdless.broker.network import failed_logins
from herdless.broker.network.failed_logins import FailedLogins


class Clock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def test_an_address_is_turned_away_after_the_limit_within_the_window() -> None:
    clock = Clock()
    logins = FailedLogins(3, 60_000, clock)
    for _ in range(2):
        logins.failed("10.0.0.1")
        clock.ms += 1_000
    assert not logins.turned_away("10.0.0.1")
    logins.failed("10.0.0.1")
    assert logins.turned_away("10.0.0.1")
    assert not logins.turned_away("10.0.0.2")  # per address
    # Once the oldest of the last three failures is a window old, it may try again.
    clock.ms = 60_000
    assert not logins.turned_away("10.0.0.1")


def test_no_limit_with_0() -> None:
    logins = FailedLogins(0, 60_000, Clock())
    for _ in range(100):
        logins.failed("10.0.0.1")
    assert not logins.turned_away("10.0.0.1")


def test_the_table_stays_bounded_under_a_flood_of_addresses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(failed_logins, "MAX_ADDRESSES", 100)
    clock = Clock()
    logins = FailedLogins(2, 60_000, clock)
    for n in range(1_000):
        logins.failed(f"10.0.{n // 256}.{n % 256}")
        clock.ms += 1
    assert len(logins._failures) <= 100

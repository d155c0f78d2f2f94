"""Storage keeps no clock of its own: it decides by the `now` its owner passes and, for
what it times between calls, by the clocks its owner gives the LogManager.

The fake clock here stands decades away from the process's clocks on both readings,
so a decision made on a clock storage read for itself would come out otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from herdless.storage import LogConfig, LogManager, PartitionLog
from tests.storage.batches import batch, split

# 2001-09-09 on the wall, and a monotonic clock that has run for 30 years.
WALL_MS = 1_000_000_000_000
MONOTONIC_MS = 30 * 365 * 86_400_000
RETENTION_MS = 60_000


class FakeClock:
    """Both readings, moved only by the test."""

    def __init__(self) -> None:
        self.wall = WALL_MS
        self.monotonic = MONOTONIC_MS

    def advance(self, ms: int) -> None:
        self.wall += ms
        self.monotonic += ms


@pytest.fixture
def fake() -> FakeClock:
    return FakeClock()


@pytest.fixture
def manager(tmp_path: Path, fake: FakeClock) -> Iterator[LogManager]:
    logs = LogManager(
        tmp_path / "data",
        LogConfig(),
        clock=lambda: fake.wall,
        monotonic_clock=lambda: fake.monotonic,
    )
    logs.open(fake.wall)
    yield logs
    logs.close()


def partition(manager: LogManager, configs: dict[str, str]) -> PartitionLog:
    # No now_ms: the manager takes the time from its clock.
    manager.create_topic("t", 1, configs)
    found = manager.partition("t", 0)
    assert found is not None
    return found


def append_now(log: PartitionLog, fake: FakeClock) -> None:
    """One record stamped by the fake wall clock, appended at that time."""
    log.append(split(batch(1, first_timestamp=fake.wall)), fake.wall)


def test_retention_decisions_follow_the_injected_clock(
    manager: LogManager, fake: FakeClock
) -> None:
    log = partition(manager, {"retention.ms": str(RETENTION_MS)})
    append_now(log, fake)
    log.roll()
    fake.advance(RETENTION_MS)
    append_now(log, fake)
    # The first segment is exactly retention.ms old by the clock: it stays. By the
    # process's wall clock it would be decades old and gone.
    assert manager.apply_retention(fake.wall) == 0
    assert log.log_start_offset == 0
    fake.advance(1)
    assert manager.apply_retention(fake.wall) == 1
    assert log.log_start_offset == 1 and log.segment_base_offsets == [1]
    # The active segment expires in its turn, rolled first as Kafka rolls it.
    fake.advance(RETENTION_MS)
    assert manager.apply_retention(fake.wall) == 1
    assert log.log_start_offset == 2 and log.segment_base_offsets == [2]


def test_segment_age_follows_the_time_appends_are_given(
    manager: LogManager, fake: FakeClock
) -> None:
    log = partition(manager, {"segment.ms": "1000", "segment.jitter.ms": "0"})
    append_now(log, fake)
    fake.advance(1000)
    append_now(log, fake)
    assert log.segment_base_offsets == [0]
    fake.advance(1)
    append_now(log, fake)
    assert log.segment_base_offsets == [0, 2]


def test_flush_ms_follows_the_injected_monotonic_clock(
    manager: LogManager, fake: FakeClock
) -> None:
    log = partition(manager, {"flush.ms": "1000"})
    append_now(log, fake)
    # Timed from the opening, on the clock's monotonic reading.
    assert not log.flush_due(fake.monotonic + 999)
    assert log.flush_due(fake.monotonic + 1000)
    fake.advance(5000)
    log.flush()  # told no time: it takes the clock's
    assert log.last_flush_ms == fake.monotonic
    append_now(log, fake)
    assert not log.flush_due(fake.monotonic + 999)
    assert log.flush_due(fake.monotonic + 1000)


def test_the_recovery_point_is_checkpointed_on_the_injected_clock(
    manager: LogManager, fake: FakeClock, tmp_path: Path
) -> None:
    log = partition(manager, {})
    recovery_point = tmp_path / "data" / "t-0" / "recovery-point"

    def checkpointed() -> int | None:
        if not recovery_point.exists():
            return None
        return int(recovery_point.read_text().split()[1])

    append_now(log, fake)
    log.flush()
    # Within a second of the opening, by the clock: synced, but not checkpointed yet.
    assert log.unflushed_messages == 0 and checkpointed() is None
    fake.advance(1000)
    append_now(log, fake)
    log.flush()
    assert checkpointed() == 2
    append_now(log, fake)
    log.flush()
    assert checkpointed() == 2
    fake.advance(1000)
    append_now(log, fake)
    log.flush()
    assert checkpointed() == 4

"""The background scrubber: what it finds is recorded; it keeps to its rate, off the loop,
and lets go at once when the broker stops."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from herdless.broker.logs.scrubber import Scrubber
from herdless.protocol.records import iter_batches
from herdless.storage import LogConfig, LogManager
from herdless.storage.damage import Damage, DamageKind
from tests.storage.batches import batch, split

SEGMENTS = 8


def filled(path: Path) -> LogManager:
    manager = LogManager(path, LogConfig.from_topic_configs({"segment.bytes": "20000"}))
    manager.open(now_ms=0)
    [log] = manager.create_topic("t", 1).partitions.values()
    while len(log.segment_base_offsets) <= SEGMENTS:
        log.append(split(batch(4, size=500)), 0)
    return manager


def sealed_bytes(manager: LogManager) -> int:
    return sum(s.size for log in manager.logs() for s in log.sealed_segments())


def test_a_pass_records_what_it_finds_and_keeps_to_its_rate(tmp_path: Path) -> None:
    manager = filled(tmp_path / "data")
    [log] = manager.logs()
    target = log.sealed_segments()[3]
    data = bytearray(target.path.read_bytes())
    position, header = list(iter_batches(bytes(data)))[2]
    data[position + header.size - 3] ^= 0x01
    target.path.write_bytes(bytes(data))
    total = sealed_bytes(manager)
    counted: list[int] = []
    rate = total * 2  # half a second a pass
    scrubber = Scrubber(manager, rate, backoff_ms=60_000, on_scrubbed=counted.append)

    async def one_pass() -> float:
        started = time.monotonic()
        await scrubber._pass()
        return time.monotonic() - started

    try:
        took = asyncio.run(one_pass())
        assert took >= total / rate * 0.9
        assert sum(counted) == total
        assert log.damage == [
            Damage(header.base_offset, header.last_offset + 1, DamageKind.CORRUPT)
        ]
    finally:
        manager.close()


def test_stopping_ends_a_slow_pass_at_once(tmp_path: Path) -> None:
    manager = filled(tmp_path / "data")
    # A pass would take about a minute.
    scrubber = Scrubber(manager, sealed_bytes(manager) // 60, backoff_ms=60_000)

    async def run_then_stop() -> float:
        running = asyncio.create_task(scrubber.run())
        await asyncio.sleep(0.3)
        started = time.monotonic()
        running.cancel()
        await scrubber.stop()
        return time.monotonic() - started

    try:
        assert asyncio.run(run_then_stop()) < 1.0
    finally:
        manager.close()

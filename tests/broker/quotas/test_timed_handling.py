"""The time a request is charged for request_percentage: its handler's own steps, not the
time it waits (a long-polling Fetch, a JoinGroup parked until the group forms)."""

from __future__ import annotations

import asyncio
import time

import pytest

from herdless.broker.quotas.enforcement import TimedHandling


async def _busy_then_waiting() -> str:
    started = time.perf_counter()
    while time.perf_counter() - started < 0.05:
        pass
    await asyncio.sleep(0.3)
    return "answered"


def test_waiting_is_not_charged() -> None:
    handling = TimedHandling(_busy_then_waiting())

    async def run() -> str:
        return await handling

    assert asyncio.run(run()) == "answered"
    assert 0.05 <= handling.seconds < 0.15


def test_a_cancelled_handler_is_cancelled_inside() -> None:
    cleaned: list[str] = []

    async def handler() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("cleaned")

    async def handled() -> None:
        await TimedHandling(handler())

    async def run() -> None:
        task = asyncio.ensure_future(handled())
        await asyncio.sleep(0.01)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run())
    assert cleaned == ["cleaned"]

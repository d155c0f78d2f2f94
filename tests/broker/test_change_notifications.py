"""Following change notifications: what each new notification names is applied once, in
order; a read that fails is tried again; names that arrive during a read are read next."""

from __future__ import annotations

import asyncio
import threading

import pytest

from herdless.broker.auth import change_notifications
from herdless.broker.auth.change_notifications import ChangeNotifications
from herdless.cluster.errors import ClusterUnavailable


def numbered(names: list[str], last_change: int) -> tuple[int, list[str]]:
    """Notifications named n-<number>: those after last_change, in order."""
    new = sorted((int(n.split("-")[1]), n) for n in names if int(n.split("-")[1]) > last_change)
    return (new[-1][0] if new else last_change), [n for _, n in new]


async def settle(follower: ChangeNotifications[list[str]]) -> None:
    for _ in range(200):
        await asyncio.sleep(0.01)
        reading = follower._reading
        if follower._pending is None and (reading is None or reading.done()):
            return
    raise AssertionError("the follower did not settle")


def test_each_new_notification_is_applied_once_in_order() -> None:
    async def run() -> list[str]:
        applied: list[str] = []
        follower = ChangeNotifications("changes", numbered, applied.extend)
        follower.bind()
        follower.on_changes(["n-1", "n-0"])
        await settle(follower)
        # The watch hands over every name each time, old ones too.
        follower.on_changes(["n-0", "n-1", "n-2"])
        await settle(follower)
        assert follower.last_change == 2
        return applied

    assert asyncio.run(run()) == ["n-0", "n-1", "n-2"]


def test_a_failed_read_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(change_notifications, "RETRY_S", 0.01)
    failures = [ClusterUnavailable("ZooKeeper is away")]

    def flaky(names: list[str], last_change: int) -> tuple[int, list[str]]:
        if failures:
            raise failures.pop()
        return numbered(names, last_change)

    async def run() -> list[str]:
        applied: list[str] = []
        follower = ChangeNotifications("changes", flaky, applied.extend)
        follower.bind()
        follower.on_changes(["n-0"])
        await settle(follower)
        return applied

    assert asyncio.run(run()) == ["n-0"]


def test_names_that_arrive_during_a_read_are_read_next_by_the_same_task() -> None:
    started, release = threading.Event(), threading.Event()
    reads: list[list[str]] = []

    def slow(names: list[str], last_change: int) -> tuple[int, list[str]]:
        reads.append(sorted(names))
        if len(reads) == 1:
            started.set()
            release.wait(5)
        return numbered(names, last_change)

    async def run() -> list[str]:
        applied: list[str] = []
        follower = ChangeNotifications("changes", slow, applied.extend)
        follower.bind()
        follower.on_changes(["n-0"])
        await asyncio.to_thread(started.wait, 5)
        follower.on_changes(["n-0", "n-1"])
        follower.on_changes(["n-0", "n-1", "n-2"])
        await asyncio.sleep(0.05)
        release.set()
        await settle(follower)
        return applied

    assert asyncio.run(run()) == ["n-0", "n-1", "n-2"]
    # The two sets of names that came during the first read are read once, the newest.
    assert reads == [["n-0"], ["n-0", "n-1", "n-2"]]

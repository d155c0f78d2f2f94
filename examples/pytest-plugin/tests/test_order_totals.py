"""The application against one real broker: `herdless_broker`, shared by the session."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from order_totals import OrderTotals, order

from herdless.testing import HerdlessBroker


def end_offsets(delivered: list[tuple[int, int]]) -> dict[int, int]:
    """Where a group that read everything commits: one past each partition's last record."""
    ends: dict[int, int] = {}
    for partition, offset in delivered:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def test_sums_each_customers_orders_and_commits_them(
    herdless_broker: HerdlessBroker, orders: str
) -> None:
    sent = [order("alice", 1250), order("bob", 300), order("alice", 50), order("carol", 999)]
    delivered = herdless_broker.produce(orders, sent)

    app = OrderTotals(herdless_broker.bootstrap, orders, "billing")
    try:
        totals = app.run_until_idle()
    finally:
        app.close()

    assert totals == {"alice": 1300, "bob": 300, "carol": 999}
    assert herdless_broker.committed("billing", orders) == end_offsets(delivered)


def test_a_new_member_goes_on_from_the_committed_offsets(
    herdless_broker: HerdlessBroker, orders: str
) -> None:
    herdless_broker.produce(orders, [order("alice", 100), order("bob", 200)])
    first = OrderTotals(herdless_broker.bootstrap, orders, "billing")
    first.run_until_idle()
    first.close()

    herdless_broker.produce(orders, [order("alice", 7)])
    second = OrderTotals(herdless_broker.bootstrap, orders, "billing")
    try:
        assert second.run_until_idle() == {"alice": 7}
    finally:
        second.close()


def test_two_members_split_the_partitions(herdless_broker: HerdlessBroker, orders: str) -> None:
    members = [OrderTotals(herdless_broker.bootstrap, orders, "billing") for _ in range(2)]
    stop = threading.Event()
    threads = [threading.Thread(target=member.run, args=(stop,)) for member in members]
    for thread in threads:
        thread.start()
    try:
        group = herdless_broker.wait_for_group_stable("billing", members=2)
        owned = [
            {tp.partition for tp in member.assignment.topic_partitions} for member in group.members
        ]
        assert sorted(len(partitions) for partitions in owned) == [1, 2]
        assert owned[0] | owned[1] == {0, 1, 2}

        customers = [f"customer-{i}" for i in range(30)]
        delivered = herdless_broker.produce(orders, [order(c, 10) for c in customers])
        expected = end_offsets(delivered)
        wait_until(lambda: herdless_broker.committed("billing", orders) == expected)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for member in members:
            member.close()

    # Every order was summed once, by the member that owned its partition.
    assert sum(member.records for member in members) == 30
    assert members[0].totals + members[1].totals == dict.fromkeys(customers, 10)


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)

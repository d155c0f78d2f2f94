"""The application against a cluster of three brokers on ZooKeeper: `herdless_cluster`."""

from __future__ import annotations

from order_totals import OrderTotals, order

from herdless.testing import HerdlessCluster


def test_totals_go_on_after_the_group_coordinator_is_killed(
    herdless_cluster: HerdlessCluster,
) -> None:
    # Replicated on all three brokers: the cluster's default here.
    herdless_cluster.create_topic("orders", partitions=3)
    herdless_cluster.produce("orders", [order("alice", 100), order("bob", 200)])
    first = OrderTotals(herdless_cluster.bootstrap, "orders", "billing")
    assert first.run_until_idle() == {"alice": 100, "bob": 200}
    first.close()

    # The group's committed offsets live in __consumer_offsets, replicated; the broker
    # that leads their partition coordinates the group. Kill it.
    coordinator = herdless_cluster.coordinator_of("billing")
    herdless_cluster.kill(coordinator)

    herdless_cluster.produce("orders", [order("alice", 5)])
    second = OrderTotals(herdless_cluster.bootstrap, "orders", "billing")
    try:
        # A new coordinator has the commits: only the new order is read.
        assert second.run_until_idle() == {"alice": 5}
    finally:
        second.close()
    assert herdless_cluster.coordinator_of("billing") != coordinator

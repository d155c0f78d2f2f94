"""Client quotas on a 3-broker cluster: kept in ZooKeeper where Kafka keeps them, and a
change made through any broker, or by `herdless quotas --zookeeper` beside the running
brokers, enforced by every broker within a second."""

from __future__ import annotations

import json
import time

from kazoo.client import KazooClient

from tests.support.cli import herdless, succeeded, table_rows
from tests.support.cluster import ClusterProcesses, cluster_fixture, zookeeper_fixture
from tests.support.quotas import alter, describe, entities

NONE, INVALID_REQUEST = 0, 42
# The client id tests.support.wire's requests carry.
WIRE_CLIENT = "wire-test"


cluster = cluster_fixture("quota-cluster")
zookeeper = zookeeper_fixture()


def seconds_until_every_broker_throttles(cluster: ClusterProcesses, throttled: bool) -> float:
    """From now until every broker answers the wire client with (or without) a throttle
    time: at most a second."""
    started = time.monotonic()
    waiting = dict(cluster.brokers)
    while waiting:
        for broker_id, broker in list(waiting.items()):
            if (describe(broker, []).throttle_time_ms > 0) == throttled:
                del waiting[broker_id]
        elapsed = time.monotonic() - started
        assert elapsed <= 1.0, f"brokers {sorted(waiting)} not yet {throttled=}"
    return time.monotonic() - started


def test_a_quota_set_through_one_broker_is_enforced_by_all_within_a_second(
    cluster: ClusterProcesses, zookeeper: KazooClient
) -> None:
    first, second, _ = cluster.brokers.values()
    # A request-time quota no request stays within: every answer carries a throttle.
    assert alter(first, [((("client-id", WIRE_CLIENT),), {"request_percentage": 0.0001})]) == [
        (NONE, None)
    ]
    seconds_until_every_broker_throttles(cluster, throttled=True)
    # Where Kafka keeps it, as Kafka writes it, with its change notification.
    data, _ = zookeeper.get(f"/config/clients/{WIRE_CLIENT}")
    assert json.loads(data) == {"version": 1, "config": {"request_percentage": "0.0001"}}
    notes = [
        zookeeper.get(f"/config/changes/{name}")[0]
        for name in zookeeper.get_children("/config/changes")
    ]
    assert f'{{"version":2,"entity_path":"clients/{WIRE_CLIENT}"}}'.encode() in notes

    assert alter(second, [((("client-id", WIRE_CLIENT),), {"request_percentage": None})]) == [
        (NONE, None)
    ]
    seconds_until_every_broker_throttles(cluster, throttled=False)
    assert not zookeeper.exists(f"/config/clients/{WIRE_CLIENT}")


def test_a_users_client_quota_sits_below_the_user_beside_its_credentials(
    cluster: ClusterProcesses, zookeeper: KazooClient
) -> None:
    first = cluster.brokers[1]
    entity = (("user", "ops"), ("client-id", "etl"))
    assert alter(first, [(entity, {"producer_byte_rate": 1024.0})]) == [(NONE, None)]
    data, _ = zookeeper.get("/config/users/ops/clients/etl")
    assert json.loads(data)["config"] == {"producer_byte_rate": "1024"}
    for broker in cluster.brokers.values():
        deadline = time.monotonic() + 1.0
        while entities(describe(broker, [("user", 0, "ops")])) != {
            entity: {"producer_byte_rate": 1024.0}
        }:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert alter(first, [((("user", ".."),), {"producer_byte_rate": 1.0})]) == [
        (INVALID_REQUEST, "ZooKeeper cannot hold an entity named '..'")
    ]


def test_quotas_set_in_zookeeper_beside_the_running_brokers_reach_them_all(
    cluster: ClusterProcesses,
) -> None:
    offline = ("--zookeeper", cluster.zookeeper.connect)
    succeeded(
        herdless(
            "quotas",
            "alter",
            "--client-id",
            WIRE_CLIENT,
            "--add-config",
            "request_percentage=0.0001",
            *offline,
        )
    )
    seconds_until_every_broker_throttles(cluster, throttled=True)
    assert ["client-id=wire-test", "request_percentage", "0.0001"] in table_rows(
        succeeded(herdless("quotas", "describe", *offline))
    )
    succeeded(
        herdless(
            "quotas",
            "alter",
            "--client-id",
            WIRE_CLIENT,
            "--delete-config",
            "request_percentage",
            *offline,
        )
    )
    seconds_until_every_broker_throttles(cluster, throttled=False)

"""Dynamic broker configs on a 3-broker cluster: kept in ZooKeeper where Kafka keeps them
(/config/brokers/<default>, /config/brokers/<id>, with change notifications), a
cluster-wide default set through one broker in force on every broker, a replication
throttle set at runtime bounding a reassignment, and both kept across a restart."""

from __future__ import annotations

import json
import os
import time

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from kafka.structs import TopicPartition
from kazoo.client import KazooClient

from tests.support.cli import herdless, succeeded
from tests.support.cluster import ClusterProcesses, cluster_fixture, zookeeper_fixture
from tests.support.wire import Wire

INVALID_REQUEST = 42
RATE = 1_000_000
MOVED_BYTES = 4_000_000


# Rates over two windows of a second, so a move of a few megabytes shows the bound.
cluster = cluster_fixture("broker-configs-cluster", **{"replication.quota.window.num": "2"})
zookeeper = zookeeper_fixture()


def described(cluster: ClusterProcesses, broker: int) -> dict[str, object]:
    """Broker `broker`'s configs, as it describes them itself (confluent-kafka sends a
    broker resource to that broker)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, str(broker))
    return admin.describe_configs([resource])[resource].result(30)


def alter(cluster: ClusterProcesses, broker: int, name: str, value: str | None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    operation = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource = ConfigResource(
        ResourceType.BROKER,
        str(broker),
        incremental_configs=[ConfigEntry(name, value, incremental_operation=operation)],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def wait_everywhere(cluster: ClusterProcesses, name: str, value: str, source: int) -> float:
    started = time.monotonic()
    waiting = set(cluster.brokers)
    while waiting:
        for broker in sorted(waiting):
            entry = described(cluster, broker)[name]
            if (entry.value, entry.source) == (value, source):  # type: ignore[attr-defined]
                waiting.discard(broker)
        assert time.monotonic() - started < 10, f"brokers {sorted(waiting)} lack {name}={value}"
        time.sleep(0.05)
    return time.monotonic() - started


def test_a_default_set_through_one_broker_is_in_force_on_every_broker(
    cluster: ClusterProcesses, zookeeper: KazooClient
) -> None:
    first = cluster.brokers[min(cluster.brokers)]
    b = ("-b", first.bootstrap)
    succeeded(herdless("configs", "--broker-defaults", "-c", "log.retention.ms=86400000", *b))
    default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    wait_everywhere(cluster, "log.retention.ms", "86400000", default)
    # Where Kafka keeps it, as Kafka writes it, with its change notification.
    data, _ = zookeeper.get("/config/brokers/<default>")
    assert json.loads(data) == {"version": 1, "config": {"log.retention.ms": "86400000"}}
    notes = [
        zookeeper.get(f"/config/changes/{name}")[0]
        for name in zookeeper.get_children("/config/changes")
    ]
    assert b'{"version":2,"entity_path":"brokers/<default>"}' in notes
    # A topic created now, without an override, takes it on every replica.
    cluster.create_topic("after-default", 1, 3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, "after-default")
    assert admin.describe_configs([resource])[resource].result(30)["retention.ms"].value == (
        "86400000"
    )
    # A broker's own value wins over the default, on that broker alone.
    last = max(cluster.brokers)
    alter(cluster, last, "log.retention.ms", "3600000")
    data, _ = zookeeper.get(f"/config/brokers/{last}")
    assert json.loads(data) == {"version": 1, "config": {"log.retention.ms": "3600000"}}
    own = described(cluster, last)["log.retention.ms"]
    assert (own.value, own.source) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)  # type: ignore[attr-defined]
    assert described(cluster, min(cluster.brokers))["log.retention.ms"].value == "86400000"  # type: ignore[attr-defined]

    # Both are kept across a restart.
    cluster.brokers[last].restart()
    cluster.restore()
    own = described(cluster, last)["log.retention.ms"]
    assert (own.value, own.source) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)  # type: ignore[attr-defined]
    alter(cluster, last, "log.retention.ms", None)
    assert described(cluster, last)["log.retention.ms"].value == "86400000"  # type: ignore[attr-defined]
    succeeded(herdless("configs", "--broker-defaults", "-d", "log.retention.ms", *b))
    wait_everywhere(cluster, "log.retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG.value)
    assert not zookeeper.exists("/config/brokers/<default>")


def test_a_broker_changes_its_own_configs_alone(cluster: ClusterProcesses) -> None:
    first, second = sorted(cluster.brokers)[:2]
    wire = Wire(cluster.brokers[first])
    try:
        request = IncrementalAlterConfigsRequest[1](
            resources=[(4, str(second), [("log.retention.ms", 0, "1000")])], validate_only=False
        )
        (answer,) = wire.call(request, IncrementalAlterConfigsResponse).responses
    finally:
        wire.close()
    assert (answer.error_code, answer.error_message) == (
        INVALID_REQUEST,
        f"Unexpected broker id, expected {first}, but received {second}",
    )


def test_a_throttle_set_at_runtime_bounds_a_reassignment(cluster: ClusterProcesses) -> None:
    topic = "throttled-at-runtime"
    cluster.create_topic(topic, 1, 1, leader_replication_throttled_replicas="*")
    cluster.produce(topic, [os.urandom(1000) for _ in range(MOVED_BYTES // 1000)], linger_ms=20)
    (source,) = cluster.metadata(topic).topics[topic].partitions[0].replicas
    joining = next(b for b in sorted(cluster.brokers) if b != source)
    alter(cluster, source, "leader.replication.throttled.rate", str(RATE))
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    try:
        started = time.monotonic()
        assert admin.alter_partition_reassignments({TopicPartition(topic, 0): [source, joining]})
        deadline = started + 60
        while admin.list_partition_reassignments({topic: [0]}):
            assert time.monotonic() < deadline, "the reassignment did not complete in 60 s"
            time.sleep(0.1)
        elapsed = time.monotonic() - started
    finally:
        admin.close()
        alter(cluster, source, "leader.replication.throttled.rate", None)
    # The bound, but for the first window's bytes and one fetch past it (a replica fetch
    # is at most 1 MiB): unthrottled, the move takes a fraction of a second.
    allowance = RATE + 1024 * 1024
    print(f"{MOVED_BYTES} B moved in {elapsed:.1f}s under a {RATE} B/s throttle")
    assert elapsed >= (MOVED_BYTES - allowance) / RATE, f"{MOVED_BYTES / elapsed:.0f} B/s"
    entry = described(cluster, source)["leader.replication.throttled.rate"]
    assert entry.source == ConfigSource.DEFAULT_CONFIG.value  # type: ignore[attr-defined]

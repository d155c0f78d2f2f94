"""Client-metrics subscriptions (KIP-714) on a 2-broker cluster: kept in ZooKeeper where
Kafka's ConfigType.ClientMetrics puts them, with a change notification, and a
subscription added or removed through one broker in force on the other within a
second."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kafka.protocol.admin import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from kazoo.client import KazooClient

from herdless.protocol.telemetry_messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from tests.support.broker import BrokerProcess
from tests.support.cluster import ClusterProcesses, running_cluster
from tests.support.wire import Wire

CLIENT_METRICS, SET, DELETE = 16, 0, 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with running_cluster(tmp_path_factory.mktemp("client-metrics-cluster"), 2) as cluster:
        yield cluster


def alter(broker: BrokerProcess, name: str, settings: dict[str, str | None]) -> int:
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest[1](
        resources=[
            Resource(
                resource_type=CLIENT_METRICS,
                resource_name=name,
                configs=[
                    Resource.AlterableConfig(
                        name=k, config_operation=DELETE if v is None else SET, value=v
                    )
                    for k, v in settings.items()
                ],
            )
        ],
        validate_only=False,
    )
    wire = Wire(broker)
    try:
        [result] = wire.call(request, IncrementalAlterConfigsResponse).responses
    finally:
        wire.close()
    return result.error_code


def listed(broker: BrokerProcess) -> set[str]:
    wire = Wire(broker)
    try:
        answer = wire.call(ListConfigResourcesRequest[0](), ListConfigResourcesResponse)
    finally:
        wire.close()
    assert answer.error_code == 0
    return {r.resource_name for r in answer.config_resources}


def within_a_second(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 1.0
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within a second"
        time.sleep(0.02)


def test_a_subscription_set_through_one_broker_is_in_force_on_the_other(
    cluster: ClusterProcesses,
) -> None:
    first, second = cluster.brokers.values()
    settings = {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
    assert alter(first, "producers", {**settings, "match": "client_id=wire-test"}) == 0
    within_a_second(lambda: "producers" in listed(second), "listed by the other broker")
    wire = Wire(second)
    try:
        asked = wire.call(
            GetTelemetrySubscriptionsRequest[0](client_instance_id=uuid.UUID(int=0)),
            GetTelemetrySubscriptionsResponse,
        )
    finally:
        wire.close()
    assert (asked.error_code, asked.requested_metrics) == (0, ["org.apache.kafka.producer."])
    assert asked.push_interval_ms == 1000

    client = KazooClient(hosts=cluster.zookeeper.connect)
    client.start(timeout=10)
    try:
        data, _ = client.get("/config/client-metrics/producers")
        assert json.loads(data) == {
            "version": 1,
            "config": {**settings, "match": "client_id=wire-test"},
        }
        notes = [
            client.get(f"/config/changes/{n}")[0] for n in client.get_children("/config/changes")
        ]
        assert b'{"version":2,"entity_path":"client-metrics/producers"}' in notes

        assert alter(second, "producers", dict.fromkeys([*settings, "match"])) == 0
        within_a_second(lambda: "producers" not in listed(first), "removed on the other broker")
        assert client.exists("/config/client-metrics/producers") is None
    finally:
        client.stop()
        client.close()

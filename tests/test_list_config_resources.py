"""ListConfigResources v1 (KIP-1142) through kafka-python's admin client: the config
resources of every type, or of the types asked for, as Kafka 4.1 lists them; a type it
does not list answered with UNSUPPORTED_VERSION; v0 still lists subscriptions alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.protocol.admin import ListConfigResourcesRequest, ListConfigResourcesResponse

from tests.support.broker import BrokerProcess
from tests.support.wire import Wire

UNSUPPORTED_VERSION = 35
TOPIC, GROUP, SUBSCRIPTION = "listed-topic", "listed-group", "listed-subscription"


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    client.create_topics([NewTopic(TOPIC, 1, 1)])
    changed = client.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.GROUP, GROUP, configs={"consumer.session.timeout.ms": "50000"}
            ),
            ConfigResource(
                ConfigResourceType.CLIENT_METRICS,
                SUBSCRIPTION,
                configs={"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"},
            ),
        ],
        incremental=True,
    )
    assert changed == {
        "group": {GROUP: "OK"},
        "client_metrics": {SUBSCRIPTION: "OK"},
    }, changed
    yield client
    client.close()


def test_every_type_is_listed_when_none_is_named(admin: KafkaAdminClient) -> None:
    listed = admin.list_config_resources()
    assert TOPIC in listed["topic"]
    assert listed["broker"] == ["0"]
    assert listed["broker_logger"] == ["0"]
    assert listed["client_metrics"] == [SUBSCRIPTION]
    # Groups with configs of their own, as Kafka lists them: not every group.
    assert listed["group"] == [GROUP]


def test_only_the_types_asked_for_are_listed(admin: KafkaAdminClient) -> None:
    assert admin.list_config_resources(["GROUP", "CLIENT_METRICS"]) == {
        "group": [GROUP],
        "client_metrics": [SUBSCRIPTION],
    }
    assert set(admin.list_config_resources(["TOPIC"])) == {"topic"}


@pytest.mark.usefixtures("admin")
def test_a_type_it_does_not_list_is_unsupported(broker: BrokerProcess) -> None:
    wire = Wire(broker)
    try:
        for resource_types in ([ConfigResourceType.UNKNOWN.value], [2, 3]):
            answer = wire.call(
                ListConfigResourcesRequest[1](resource_types=resource_types),
                ListConfigResourcesResponse,
            )
            assert (answer.error_code, answer.config_resources) == (UNSUPPORTED_VERSION, [])
        # v0, which was ListClientMetricsResources: subscriptions alone.
        answer = wire.call(ListConfigResourcesRequest[0](), ListConfigResourcesResponse)
        assert [r.resource_name for r in answer.config_resources] == [SUBSCRIPTION]
    finally:
        wire.close()

"""Consumer groups' own configs (KIP-848 group configs, Kafka 4.0): DescribeConfigs and
IncrementalAlterConfigs on resource type GROUP with kafka-python's admin client, kept
across a restart, and applied to the group's members at their next heartbeat."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)

from herdless.protocol.consumer_group_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import herdless, refused, succeeded, table_rows
from tests.support.cluster import running_cluster
from tests.support.wire import Wire

SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"
ASSIGNMENT = "consumer.assignment.interval.ms"
OFFLOAD = "consumer.assignor.offload.enable"
DEAD_LETTER_TOPIC = "errors.deadletterqueue.topic.name"
DEAD_LETTER_COPY = "errors.deadletterqueue.copy.record.enable"
BOUNDS = {
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    args = [a for name, value in BOUNDS.items() for a in ("--set", f"{name}={value}")]
    with module_broker(tmp_path_factory.mktemp("group-configs") / "data", *args) as process:
        yield process


def group(name: str, **configs: Any) -> ConfigResource:
    return ConfigResource(ConfigResourceType.GROUP, name, configs or None)


def alter(bootstrap: str, name: str, **configs: Any) -> str:
    """IncrementalAlterConfigs; what kafka-python makes of the answer ('OK' or the error)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        renamed = {k.replace("_", "."): v for k, v in configs.items()}
        result = admin.alter_configs([group(name, **renamed)], raise_on_unknown=False)
        return str(result["group"][name])
    finally:
        admin.close()


def described(broker: BrokerProcess, name: str) -> dict[str, tuple[str, int]]:
    """DescribeConfigs of the group, asked of `broker` itself: name -> (value, source)."""
    Resource = DescribeConfigsRequest[4].DescribeConfigsResource
    request = DescribeConfigsRequest[4](
        resources=[Resource(resource_type=32, resource_name=name, configuration_keys=None)],
        include_synonyms=False,
        include_documentation=False,
    )
    wire = Wire(broker)
    try:
        (result,) = wire.call(request, DescribeConfigsResponse[4]).results  # type: ignore[attr-defined]
    finally:
        wire.close()
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def joined(broker: BrokerProcess, name: str, epoch: int = 0) -> Any:
    """A member joins through a raw ConsumerGroupHeartbeat (or leaves, at epoch -1); the
    answer."""
    request = ConsumerGroupHeartbeatRequest[1](
        group_id=name,
        member_id=f"{name}-member",
        member_epoch=epoch,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=["no-such-topic"],
        topic_partitions=[],
    )
    wire = Wire(broker)
    try:
        return wire.call(request, ConsumerGroupHeartbeatResponse[1])
    finally:
        wire.close()


def consumer_configs(broker: BrokerProcess, name: str) -> dict[str, tuple[str, int]]:
    """The group's consumer group configs (a share group's are test_share_groups.py's)."""
    return {k: v for k, v in described(broker, name).items() if k.startswith("consumer.")}


def test_a_group_has_the_brokers_defaults_until_it_sets_its_own(broker: BrokerProcess) -> None:
    assert consumer_configs(broker, "plain") == {
        ASSIGNMENT: ("1000", DEFAULT_CONFIG),
        OFFLOAD: ("true", DEFAULT_CONFIG),
        HEARTBEAT: ("5000", DEFAULT_CONFIG),
        SESSION: ("45000", DEFAULT_CONFIG),
    }
    configs = described(broker, "plain")
    assert configs[DEAD_LETTER_COPY] == ("false", DEFAULT_CONFIG)
    assert configs[DEAD_LETTER_TOPIC] == ("", DEFAULT_CONFIG)
    assert alter(broker.bootstrap, "tuned", consumer_session_timeout_ms="9000") == "OK"
    assert alter(broker.bootstrap, "tuned", consumer_assignment_interval_ms="0") == "OK"
    assert alter(broker.bootstrap, "tuned", consumer_assignor_offload_enable="false") == "OK"
    assert consumer_configs(broker, "tuned") == {
        ASSIGNMENT: ("0", GROUP_CONFIG),
        OFFLOAD: ("false", GROUP_CONFIG),
        HEARTBEAT: ("5000", DEFAULT_CONFIG),
        SESSION: ("9000", GROUP_CONFIG),
    }
    assert described(broker, "plain")[SESSION] == ("45000", DEFAULT_CONFIG)


@pytest.mark.parametrize(
    ("configs", "words"),
    [
        ({"consumer_session_timeout_ms": "999"}, f"{SESSION} must be greater than or equal to"),
        ({"consumer_session_timeout_ms": "60001"}, f"{SESSION} must be less than or equal to"),
        ({"consumer_heartbeat_interval_ms": "50"}, f"{HEARTBEAT} must be greater than or equal"),
        ({"consumer_heartbeat_interval_ms": "15001"}, f"{HEARTBEAT} must be less than or equal"),
        ({"consumer_session_timeout_ms": "1000"}, f"{SESSION} must be greater than {HEARTBEAT}"),
        ({"consumer_session_timeout_ms": "soon"}, "Invalid value soon"),
        ({"consumer_assignment_interval_ms": "15001"}, f"{ASSIGNMENT} must be less than"),
        ({"consumer_assignor_offload_enable": "maybe"}, "Expected value to be either true"),
        ({"consumer_max_poll_ms": "1"}, "Unknown group config name: consumer.max.poll.ms"),
    ],
)
def test_kafkas_checks_refuse_what_is_out_of_bounds(
    broker: BrokerProcess, configs: dict[str, str], words: str
) -> None:
    answer = alter(broker.bootstrap, "refused", **configs)
    assert "InvalidConfigurationError" in answer and words in answer, answer
    assert described(broker, "refused")[SESSION] == ("45000", DEFAULT_CONFIG)


def test_members_get_the_groups_heartbeat_interval_and_session(broker: BrokerProcess) -> None:
    assert alter(broker.bootstrap, "quick", consumer_heartbeat_interval_ms="250") == "OK"
    assert alter(broker.bootstrap, "quick", consumer_session_timeout_ms="1000") == "OK"
    answer = joined(broker, "quick")
    assert (answer.error_code, answer.heartbeat_interval_ms) == (0, 250)
    assert joined(broker, "default").heartbeat_interval_ms == 5000
    time.sleep(1.5)  # silent for longer than the group's session: it is removed
    again = joined(broker, "quick")
    assert again.member_epoch > answer.member_epoch  # a new member, a new group epoch
    # Deleting a config goes back to the broker's default (the pair is checked as one).
    back = {"consumer_heartbeat_interval_ms": ("DELETE", None)}
    assert "must be greater than" in alter(broker.bootstrap, "quick", **back)
    back["consumer_session_timeout_ms"] = ("DELETE", None)
    assert alter(broker.bootstrap, "quick", **back) == "OK"
    assert described(broker, "quick")[HEARTBEAT] == ("5000", DEFAULT_CONFIG)
    assert joined(broker, "quick").heartbeat_interval_ms == 5000


def test_a_groups_configs_outlive_the_group_as_in_kafka(broker: BrokerProcess) -> None:
    """Kafka keeps a group's configs apart from the group (in its metadata log): deleting the
    group, or its expiry, leaves them, and a group of that id made again has them. So a
    group's configs may be set before its first member joins, and survive its members all
    leaving; they go with IncrementalAlterConfigs' DELETE."""
    assert alter(broker.bootstrap, "kept-configs", consumer_heartbeat_interval_ms="250") == "OK"
    first = joined(broker, "kept-configs")
    assert (first.error_code, first.heartbeat_interval_ms) == (0, 250)
    assert joined(broker, "kept-configs", epoch=-1).error_code == 0
    wire = Wire(broker)
    try:
        request = DeleteGroupsRequest[2](groups_names=["kept-configs"])
        (deleted,) = wire.call(request, DeleteGroupsResponse[2]).results  # type: ignore[attr-defined]
    finally:
        wire.close()
    assert deleted.error_code == 0
    assert described(broker, "kept-configs")[HEARTBEAT] == ("250", GROUP_CONFIG)
    again = joined(broker, "kept-configs")
    assert again.member_epoch == 1  # a new group...
    assert again.heartbeat_interval_ms == 250  # ...with the configs of the one deleted


def test_group_configs_outlive_a_restart(tmp_path: Path) -> None:
    args = [a for name, value in BOUNDS.items() for a in ("--set", f"{name}={value}")]
    process = BrokerProcess(tmp_path / "data", *args).start()
    try:
        assert alter(process.bootstrap, "kept", consumer_session_timeout_ms="7000") == "OK"
        process.stop()
        process = BrokerProcess(tmp_path / "data", *args, port=process.port).start()
        assert described(process, "kept")[SESSION] == ("7000", GROUP_CONFIG)
    finally:
        process.stop()


def test_on_a_cluster_every_broker_sees_a_change_made_through_any(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with running_cluster(tmp_path_factory.mktemp("group-configs-cluster"), 2, **BOUNDS) as cluster:
        first, second = cluster.brokers.values()
        assert alter(first.bootstrap, "shared", consumer_session_timeout_ms="7000") == "OK"
        # Each broker, the one that took the change too, applies it when ZooKeeper tells
        # it of the change, as Kafka's brokers do: in any order.
        deadline = time.monotonic() + 10
        seen = [described(b, "shared")[SESSION] for b in (first, second)]
        while seen != [("7000", GROUP_CONFIG)] * 2:
            assert time.monotonic() < deadline, seen
            time.sleep(0.1)
            seen = [described(b, "shared")[SESSION] for b in (first, second)]


def test_the_cli_shows_and_changes_a_groups_configs(broker: BrokerProcess) -> None:
    def configs(*args: str) -> str:
        return succeeded(herdless("groups", "configs", "cli-tuned", *args, "-b", broker.bootstrap))

    assert table_rows(configs())[:4] == [
        [ASSIGNMENT, "1000", "default_config"],
        [OFFLOAD, "true", "default_config"],
        [HEARTBEAT, "5000", "default_config"],
        [SESSION, "45000", "default_config"],
    ]
    assert [DEAD_LETTER_COPY, "false", "default_config"] in table_rows(configs())
    assert [DEAD_LETTER_TOPIC, "-", "default_config"] in table_rows(configs())
    assert ["share.session.timeout.ms", "45000", "default_config"] in table_rows(configs())
    assert "changed 2 config(s) of group cli-tuned" in configs(
        "--config", f"{SESSION}=20000", "--config", f"{HEARTBEAT}=2000"
    )
    document = json.loads(configs("-o", "json"))
    assert document["configs"][3] == {
        "name": SESSION,
        "value": "20000",
        "source": "dynamic_group_config",
    }
    refused(
        herdless("groups", "configs", "cli-tuned", "-c", f"{SESSION}=1", "-b", broker.bootstrap),
        f"{SESSION} must be greater than or equal to",
    )

"""Share groups' own configs (KIP-932 group configs, as Kafka 4.2 has them): checked as
Kafka's GroupConfig checks them, and read by the coordinator at the next heartbeat."""

from __future__ import annotations

from dataclasses import replace

import pytest

from herdless.coordinator import TimerKey, TimerKind
from herdless.coordinator.group_config import GroupConfigLimits, GroupConfigs, InvalidGroupConfig
from herdless.coordinator.share_messages import ShareGroupHeartbeatRequest
from tests.coordinator.context import TEST_CONFIG, Context

LIMITS = GroupConfigLimits()


@pytest.mark.parametrize(
    "configs",
    [
        {"share.auto.offset.reset": "earliest"},
        {"share.auto.offset.reset": "LATEST"},
        {"share.auto.offset.reset": "by_duration:P1D"},
        {"share.auto.offset.reset": "by_duration:PT1H30M15.5S"},
        {"share.isolation.level": "read_committed"},
        {"share.record.lock.duration.ms": "15000"},
        {"share.delivery.count.limit": "10"},
        {"share.partition.max.record.locks": "10000"},
        {"share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "15000"},
    ],
)
def test_values_kafka_accepts(configs: dict[str, str]) -> None:
    LIMITS.validate(configs)


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"share.auto.offset.reset": "by_duration:-PT1H"}, "'by_duration:<PnDTnHnMn.nS.>'"),
        ({"share.auto.offset.reset": "by_duration:PT"}, "'by_duration:<PnDTnHnMn.nS.>'"),
        ({"share.auto.offset.reset": "none"}, "either 'earliest', 'latest'"),
        ({"share.isolation.level": "READ_COMMITTED"}, "String must be one of"),
        ({"share.record.lock.duration.ms": "60001"}, "group.share.max.record.lock.duration"),
        ({"share.delivery.count.limit": "1"}, "group.share.min.delivery.count.limit"),
        ({"share.partition.max.record.locks": "lots"}, "Not a number of type INT"),
        ({"share.session.timeout.ms": "44999"}, "group.share.min.session.timeout.ms"),
        ({"share.heartbeat.interval.ms": "15001"}, "group.share.max.heartbeat.interval.ms"),
        ({"share.renew.acknowledge.enable": "true"}, "Unknown group config name"),
    ],
)
def test_values_kafka_refuses(configs: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidGroupConfig, match=message.replace(".", r"\.")):
        LIMITS.validate(configs)


def test_the_session_must_outlast_the_heartbeat() -> None:
    limits = GroupConfigLimits(min_share_session_timeout_ms=1_000)
    with pytest.raises(InvalidGroupConfig, match="share.session.timeout.ms must be greater than"):
        limits.validate({"share.session.timeout.ms": "5000"})


def test_a_groups_own_session_and_heartbeat_reach_its_members() -> None:
    ctx = Context(replace(TEST_CONFIG, group_configs=GroupConfigs()))
    ctx.config.group_configs.put(
        "tuned", {"share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "7000"}
    )
    req = ShareGroupHeartbeatRequest("tuned", "m1", 0, subscribed_topic_names=("t",))
    token, result = ctx.send(
        lambda shard, t, now: shard.share_group_heartbeat(req, ctx.topics, t, now)
    )
    assert result.reply_to(token).heartbeat_interval_ms == 7_000
    assert ctx.timers[TimerKey(TimerKind.SHARE_SESSION, "tuned", "m1")] == ctx.now + 50_000

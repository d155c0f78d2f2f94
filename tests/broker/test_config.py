"""Broker settings read as Kafka 3.9 reads its server.properties."""

from __future__ import annotations

import pytest

from herdless.broker.config import BrokerConfig, ConfigError
from herdless.coordinator.config import ConsumerGroupMigrationPolicy


def configured(properties: dict[str, str]) -> BrokerConfig:
    config = BrokerConfig()
    config.apply_properties(properties)
    return config


def test_the_finest_retention_unit_wins_whatever_the_order() -> None:
    both = {"log.retention.ms": "5000", "log.retention.hours": "2"}
    assert configured(both).log_config().retention_ms == 5000
    assert configured(dict(reversed(both.items()))).log_config().retention_ms == 5000
    assert configured({"log.retention.hours": "2"}).log_config().retention_ms == 7_200_000
    minutes = {"log.retention.hours": "2", "log.retention.minutes": "3"}
    assert configured(minutes).log_config().retention_ms == 180_000
    roll = {"log.roll.hours": "1", "log.roll.ms": "60000"}
    assert configured(roll).log_config().segment_ms == 60_000


@pytest.mark.parametrize(
    "key", ["log.retention.hours", "log.retention.minutes", "log.retention.ms"]
)
def test_any_negative_retention_is_kept_for_ever(key: str) -> None:
    # Kafka maps every negative retention time to -1, the common "log.retention.hours=-1".
    assert configured({key: "-1"}).log_config().retention_ms == -1
    assert configured({key: "-5"}).log_config().retention_ms == -1


def test_a_later_setting_in_another_unit_does_not_beat_a_finer_one() -> None:
    config = configured({"log.retention.ms": "5000"})
    config.apply_properties({"log.retention.hours": "1"})  # e.g. --set after the file
    assert config.log_config().retention_ms == 5000


def test_deprecated_message_format_versions_are_accepted() -> None:
    for version in ("0.10.2", "0.10.0.1", "2.8.2", "3.0-IV1"):
        config = configured({"log.message.format.version": version})
        assert config.log_config().message_format_version == version
    with pytest.raises(ConfigError, match="not a valid version"):
        configured({"log.message.format.version": "9.9"})


def test_a_retention_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ConfigError, match="log.retention.hours"):
        configured({"log.retention.hours": "a week"})


def test_a_boolean_setting_reads_as_kafka_reads_it() -> None:
    config = configured({"auto.create.topics.enable": " FALSE ", "delete.topic.enable": "True"})
    assert (config.auto_create_topics, config.delete_topic_enable) == (False, True)
    with pytest.raises(ConfigError, match="Invalid value yes for configuration log.cleaner.enable"):
        configured({"log.cleaner.enable": "yes"})


def test_consumer_group_settings_follow_kafkas_rules() -> None:
    config = configured({})
    config.validate()
    coordinator = config.coordinator_config()
    assert (
        coordinator.consumer_session_timeout_ms,
        coordinator.consumer_heartbeat_interval_ms,
    ) == (
        45_000,
        5_000,
    )
    assert coordinator.consumer_assignors == ("uniform", "range")
    assert coordinator.consumer_migration_policy is ConsumerGroupMigrationPolicy.BIDIRECTIONAL
    # Kafka 4.3's KIP-1263 defaults: a target a second at most, its assignor off the loop.
    assert coordinator.consumer_assignment_interval_ms == 1_000
    assert coordinator.consumer_assignor_offload_enable is True
    inline = configured(
        {
            "group.consumer.assignment.interval.ms": "0",
            "group.consumer.assignor.offload.enable": "false",
        }
    )
    inline.validate()
    assert inline.coordinator_config().consumer_assignment_interval_ms == 0
    assert inline.coordinator_config().consumer_assignor_offload_enable is False
    assert inline.group_config_limits().defaults()["consumer.assignment.interval.ms"] == "0"
    upgrade_only = configured({"group.consumer.migration.policy": "Upgrade"})
    policy = upgrade_only.coordinator_config().consumer_migration_policy
    assert policy is ConsumerGroupMigrationPolicy.UPGRADE  # any case, as Kafka reads it
    low = configured(
        {
            "group.consumer.session.timeout.ms": "3000",
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.min.heartbeat.interval.ms": "100",
            "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
        }
    )
    low.validate()
    assert low.coordinator_config().consumer_session_timeout_ms == 3_000
    assert low.coordinator_config().consumer_assignors == ("range",)
    for properties, message in (
        ({"group.consumer.session.timeout.ms": "3000"}, "must be between"),
        ({"group.consumer.heartbeat.interval.ms": "20000"}, "must be between"),
        (
            {
                "group.consumer.heartbeat.interval.ms": "45000",
                "group.consumer.max.heartbeat.interval.ms": "50000",
            },
            "must be less than",
        ),
        ({"group.consumer.min.session.timeout.ms": "70000"}, "must be at least"),
        ({"group.consumer.assignment.interval.ms": "15001"}, "must be between"),
        ({"group.consumer.assignment.interval.ms": "-1"}, "must be at least 0"),
        ({"group.consumer.assignors": "sticky"}, "no assignor 'sticky'"),
        ({"group.consumer.migration.policy": "sideways"}, "must be one of"),
    ):
        with pytest.raises(ConfigError, match=message):
            configured(properties).validate()


def test_share_group_settings_follow_kafkas_rules() -> None:
    coordinator = configured({}).coordinator_config()
    assert (
        coordinator.share_session_timeout_ms,
        coordinator.share_heartbeat_interval_ms,
        coordinator.share_max_group_size,
        coordinator.share_assignors,
    ) == (45_000, 5_000, 200, ("simple",))
    assert configured({}).group_share_enable is True  # Kafka 4.2 serves share groups
    low = configured(
        {
            "group.share.session.timeout.ms": "3000",
            "group.share.min.session.timeout.ms": "1000",
            "group.share.heartbeat.interval.ms": "500",
            "group.share.min.heartbeat.interval.ms": "100",
            "group.share.assignors": "org.apache.kafka.coordinator.group.assignor.SimpleAssignor",
            "group.share.enable": "false",
        }
    )
    low.validate()
    assert low.coordinator_config().share_session_timeout_ms == 3_000
    assert low.group_config_limits().defaults()["share.heartbeat.interval.ms"] == "500"
    assert low.group_share_enable is False
    for properties, message in (
        ({"group.share.session.timeout.ms": "3000"}, "group.share.session.timeout.ms .* between"),
        ({"group.share.heartbeat.interval.ms": "20000"}, "must be between"),
        (
            {
                "group.share.heartbeat.interval.ms": "45000",
                "group.share.max.heartbeat.interval.ms": "50000",
            },
            "must be less than group.share.session.timeout.ms",
        ),
        ({"group.share.max.size": "1001"}, "group.share.max.size"),
        ({"group.share.assignors": "uniform"}, "no assignor 'uniform'"),
        ({"group.share.enable": "maybe"}, "group.share.enable"),
    ):
        with pytest.raises(ConfigError, match=message):
            configured(properties).validate()


def test_fetch_session_slots_may_be_0_but_not_negative() -> None:
    config = BrokerConfig()
    assert config.max_incremental_fetch_session_cache_slots == 1000  # Kafka's default
    config.apply_properties({"max.incremental.fetch.session.cache.slots": "0"})
    config.validate()
    assert config.max_incremental_fetch_session_cache_slots == 0
    config.apply_properties({"max.incremental.fetch.session.cache.slots": "-1"})
    with pytest.raises(ConfigError, match="max.incremental.fetch.session.cache.slots must be"):
        config.validate()


def test_share_partition_settings_follow_kafkas_rules() -> None:
    config = BrokerConfig()
    config.apply_properties(
        {
            "group.share.record.lock.duration.ms": "2000",
            "group.share.min.record.lock.duration.ms": "1000",
            "group.share.delivery.count.limit": "3",
        }
    )
    config.validate()
    limits = config.share_group_limits()
    assert (limits.record_lock_duration_ms, limits.delivery_count_limit) == (2_000, 3)
    # The same settings default and bound the groups' own share.* configs.
    defaults = config.group_config_limits().defaults()
    assert defaults["share.record.lock.duration.ms"] == "2000"
    assert defaults["share.delivery.count.limit"] == "3"
    for settings, named in (
        ({"group.share.delivery.count.limit": "11"}, "group.share.delivery.count.limit"),
        ({"group.share.partition.max.record.locks": "99"}, "max.record.locks"),
        # The default minimum is 15 s: a shorter lock needs a lower minimum too.
        ({"group.share.record.lock.duration.ms": "5000"}, "group.share.min.record.lock"),
    ):
        config = BrokerConfig()
        config.apply_properties(settings)
        with pytest.raises(ConfigError, match=named):
            config.validate()


def test_the_share_coordinator_takes_kafkas_settings_and_bounds() -> None:
    assert BrokerConfig().share_coordinator_config().num_partitions == 50
    config = configured(
        {
            "share.coordinator.state.topic.num.partitions": "6",
            "share.coordinator.snapshot.update.records.per.snapshot": "20",
        }
    )
    share = config.share_coordinator_config()
    assert (share.num_partitions, share.snapshot_update_records_per_snapshot) == (6, 20)
    # Kafka bounds the updates between two snapshots to 0..500.
    too_many = configured({"share.coordinator.snapshot.update.records.per.snapshot": "501"})
    with pytest.raises(ConfigError, match="share.coordinator.snapshot.update.records"):
        too_many.validate()

from __future__ import annotations

import dataclasses

import pytest

from herdless.storage import TOPIC_CONFIG_NAMES, ConfigSource, InvalidConfigError, LogConfig
from herdless.storage.config import TOPIC_CONFIG_TYPES


def test_kafka_defaults() -> None:
    configs = LogConfig().to_topic_configs()
    assert configs["segment.bytes"] == "1073741824"
    assert configs["retention.ms"] == "604800000"
    assert configs["retention.bytes"] == "-1"
    assert configs["flush.messages"] == "9223372036854775807"
    assert configs["cleanup.policy"] == "delete"
    assert configs["message.timestamp.type"] == "CreateTime"
    assert set(configs) == set(TOPIC_CONFIG_NAMES)


def test_parse_and_render_round_trip() -> None:
    given = {
        "segment.bytes": "1048576",
        "retention.ms": "-1",
        "flush.messages": "1",
        "cleanup.policy": "compact, delete",
        "message.timestamp.type": "LogAppendTime",
    }
    config = LogConfig.from_topic_configs(given)
    assert config.segment_bytes == 1048576
    assert config.retention_ms == -1
    assert config.flush_messages == 1
    assert config.compacts and config.deletes
    assert config.log_append_time
    again = LogConfig.from_topic_configs(config.to_topic_configs())
    assert dataclasses.replace(again, overrides=config.overrides) == config
    assert config.explicit_topic_configs()["cleanup.policy"] == "compact,delete"


def test_long_max_means_never() -> None:
    config = LogConfig.from_topic_configs({"flush.ms": "9223372036854775807"})
    assert config.flush_ms is None


@pytest.mark.parametrize(
    ("name", "value", "complaint"),
    [
        ("no.such.config", "1", "unknown"),
        ("segment.bytes", "lots", "not an integer"),
        ("segment.bytes", "10", "outside"),
        ("segment.bytes", "4294967296", "outside"),
        ("retention.ms", "-2", "outside"),
        ("cleanup.policy", "shred", "cleanup.policy"),
        ("cleanup.policy", "compact,", "cleanup.policy"),
        ("message.timestamp.type", "createtime", "message.timestamp.type"),
        ("min.insync.replicas", "0", "outside"),
        ("flush.messages", "0", "outside"),
        ("compression.type", "brotli", "compression.type"),
        ("compression.gzip.level", "0", "between 1 and 9"),
        ("compression.gzip.level", "10", "outside"),
        ("compression.lz4.level", "18", "outside"),
        ("compression.zstd.level", "23", "outside"),
        ("segment.jitter.ms", "-1", "outside"),
        ("max.compaction.lag.ms", "0", "outside"),
        ("message.timestamp.before.max.ms", "-1", "outside"),
        ("preallocate", "yes", "true or false"),
        ("leader.replication.throttled.replicas", "0-1", "partitionId:brokerId"),
        ("message.format.version", "latest", "not a valid version"),
        ("message.format.version", "3.10", "not a valid version"),
        ("message.format.version", "4.0", "not a valid version"),
        ("min.cleanable.dirty.ratio", "1.5", "outside"),
        ("min.cleanable.dirty.ratio", "1_0", "not a number"),
        ("local.retention.ms", "-3", "outside"),
    ],
)
def test_bad_configs_are_named(name: str, value: str, complaint: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        LogConfig.from_topic_configs({name: value})
    assert name in str(caught.value)
    assert complaint in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_config_sources() -> None:
    broker = LogConfig.from_topic_configs({"retention.ms": "1000"})
    topic = LogConfig.from_topic_configs({"segment.bytes": "100000"}, base=broker)
    assert topic.retention_ms == 1000
    assert topic.config_source("segment.bytes") == ConfigSource.TOPIC_CONFIG
    assert topic.config_source("retention.ms") == ConfigSource.STATIC_BROKER_CONFIG
    assert topic.config_source("flush.ms") == ConfigSource.DEFAULT_CONFIG
    assert topic.is_default("flush.ms") and not topic.is_default("segment.bytes")
    assert topic.overrides == {"segment.bytes"}


def test_compression_types_and_levels() -> None:
    assert LogConfig().target_compression is None  # "producer": batches stay as sent
    zstd = LogConfig.from_topic_configs({"compression.type": "zstd", "compression.zstd.level": "7"})
    assert zstd.target_compression == (4, 7)
    assert LogConfig.from_topic_configs(
        {"compression.type": "uncompressed"}
    ).target_compression == (
        0,
        None,
    )
    gzip = LogConfig.from_topic_configs({"compression.type": "gzip"})
    assert gzip.target_compression == (1, -1)  # -1: the codec's default level


def test_every_kafka_topic_config_is_known() -> None:
    # Kafka 3.9's topic configs: tools may set any of them, and DescribeConfigs lists them...
    kafka_39 = {
        "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
        "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms",
        "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
        "index.interval.bytes", "leader.replication.throttled.replicas",
        "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms",
        "max.message.bytes", "message.downconversion.enable", "message.format.version",
        "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms", "message.timestamp.type",
        "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
        "preallocate", "remote.log.copy.disable", "remote.log.delete.on.disable",
        "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes",
        "segment.index.bytes", "segment.jitter.ms", "segment.ms",
        "unclean.leader.election.enable",
    }  # fmt: skip
    # ...and the one KIP-1191 adds, which a share group's dead-letter topic must set.
    known = kafka_39 | {"errors.deadletterqueue.group.enable"}
    assert set(TOPIC_CONFIG_NAMES) == known
    assert set(TOPIC_CONFIG_TYPES) == known  # DescribeConfigs reports each one's type
    defaults = LogConfig().to_topic_configs()
    assert defaults["preallocate"] == "false"
    assert defaults["message.downconversion.enable"] == "true"
    assert defaults["max.compaction.lag.ms"] == "9223372036854775807"
    assert defaults["local.retention.ms"] == "-2"
    assert defaults["compression.lz4.level"] == "9"


def test_settings_with_nothing_to_act_on_are_kept_and_reported() -> None:
    given = {
        "unclean.leader.election.enable": "true",
        "leader.replication.throttled.replicas": "0:1, 1:1",
        "follower.replication.throttled.replicas": "*",
        "preallocate": "true",
        "file.delete.delay.ms": "1000",
        "message.format.version": "2.8-IV1",
    }
    config = LogConfig.from_topic_configs(given)
    assert config.explicit_topic_configs() == {
        **given,
        "leader.replication.throttled.replicas": "0:1,1:1",
    }


def test_cross_config_checks() -> None:
    with pytest.raises(InvalidConfigError, match="min.compaction.lag.ms"):
        LogConfig.from_topic_configs(
            {"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"}
        )
    with pytest.raises(InvalidConfigError, match="tiered storage"):
        LogConfig.from_topic_configs({"remote.storage.enable": "true"})


def test_timestamp_bounds_fall_back_to_the_deprecated_difference() -> None:
    assert LogConfig().timestamp_bounds == (None, None)
    config = LogConfig.from_topic_configs(
        {"message.timestamp.difference.max.ms": "100", "message.timestamp.after.max.ms": "5"}
    )
    assert config.timestamp_bounds == (100, 5)
    appended = LogConfig.from_topic_configs(
        {"message.timestamp.before.max.ms": "1", "message.timestamp.type": "LogAppendTime"}
    )
    assert appended.timestamp_bounds == (None, None)  # the broker's clock stamps them


def test_compaction_lag_bounds_how_long_a_segment_stays_active() -> None:
    compact = {"cleanup.policy": "compact", "segment.ms": "10000"}
    assert LogConfig.from_topic_configs(compact).max_segment_ms == 10000
    lagged = LogConfig.from_topic_configs({**compact, "max.compaction.lag.ms": "3000"})
    assert lagged.max_segment_ms == 3000
    deleting = LogConfig.from_topic_configs(
        {"segment.ms": "10000", "max.compaction.lag.ms": "3000"}
    )
    assert deleting.max_segment_ms == 10000


@pytest.mark.parametrize(
    "version",
    [
        "0.8.2",
        "0.8.2.2",
        "0.10.0",
        "0.10.0.1",
        "0.10.0-IV1",
        "0.11.0.3",
        "1.0",
        "1.1.1",
        "2.8.2",
        "2.8.1-IV0",
        "3.0-IV1",
        "3.9",
        "3.9.0",
        "4.0-IV1",
    ],
)
def test_message_format_versions_kafka_accepts_are_accepted(version: str) -> None:
    # Kafka 3.9's MetadataVersion.fromVersionString: known versions, a patch release
    # counting as its release. Ignored since 3.0 (always format v2), as here.
    config = LogConfig.from_topic_configs({"message.format.version": version})
    assert config.to_topic_configs()["message.format.version"] == version


@pytest.mark.parametrize(
    ("name", "value", "parsed"),
    [
        ("retention.bytes", "-7", -7),  # any negative: no limit
        ("cleanup.policy", "", ""),  # neither deleted nor compacted
        ("min.cleanable.dirty.ratio", "0x1p-1", 0.5),  # Java's Double.parseDouble
        ("min.cleanable.dirty.ratio", "0.25f", 0.25),
        ("min.cleanable.dirty.ratio", ".5", 0.5),
    ],
)
def test_values_kafka_accepts_are_accepted(name: str, value: str, parsed: object) -> None:
    config = LogConfig.from_topic_configs({name: value})
    assert getattr(config, name.replace(".", "_")) == parsed
    assert LogConfig.from_topic_configs(config.explicit_topic_configs()) == config


def test_a_nan_ratio_is_accepted_as_kafka_accepts_it_and_round_trips() -> None:
    config = LogConfig.from_topic_configs({"min.cleanable.dirty.ratio": "NaN"})
    assert config.explicit_topic_configs() == {"min.cleanable.dirty.ratio": "NaN"}

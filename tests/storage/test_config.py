from __future__ import annotations

import dataclasses

import pytest

from herdless.storage import TOPIC_CONFIG_NAMES, ConfigSource, InvalidConfigError, LogConfig


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
        ("cleanup.policy", "", "cleanup.policy"),
        ("message.timestamp.type", "createtime", "message.timestamp.type"),
        ("min.insync.replicas", "0", "outside"),
        ("flush.messages", "0", "outside"),
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


def test_compression_type_producer_is_accepted_and_recompression_refused() -> None:
    config = LogConfig.from_topic_configs({"compression.type": "producer"})
    assert config.to_topic_configs()["compression.type"] == "producer"
    assert config.config_source("compression.type") is ConfigSource.TOPIC_CONFIG
    with pytest.raises(InvalidConfigError, match="only 'producer'"):
        LogConfig.from_topic_configs({"compression.type": "zstd"})

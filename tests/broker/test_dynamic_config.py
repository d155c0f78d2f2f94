"""Dynamic broker configs without a broker: Kafka's rules of what may change at which
level, how levels stack over the static settings, IncrementalAlterConfigs' operations on
one level, passwords encrypted as Kafka's EncryptingPasswordEncoder does, and log levels
by log4j's names."""

from __future__ import annotations

import logging

import pytest

from herdless.broker.config import BrokerConfig
from herdless.broker.dynamic_config import loggers
from herdless.broker.dynamic_config.layers import DynamicBrokerConfig, effective
from herdless.broker.dynamic_config.passwords import (
    PasswordDecodeError,
    decode_password,
    encode_password,
)
from herdless.broker.dynamic_config.rules import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    DynamicConfigError,
    check_change,
    incremental_layer,
    is_dynamic,
    synonyms,
)
from herdless.protocol.errors import ErrorCode


def known(name: str) -> bool:
    return name in ("broker.id", "num.partitions", "log.retention.ms")


def refusal(changed: set[str], per_broker: bool = True) -> tuple[ErrorCode, str]:
    with pytest.raises(DynamicConfigError) as caught:
        check_change(changed, per_broker, {"ssl"}, known)
    return caught.value.error_code, str(caught.value)


def test_kafkas_dynamic_configs_are_dynamic_and_the_rest_read_only() -> None:
    for name in (
        "log.retention.ms",
        "log.retention.hours",
        "log.segment.bytes",
        "log.cleanup.policy",
        "message.max.bytes",
        "compression.type",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "transaction.partition.verification.enable",
        "listener.name.ssl.ssl.keystore.location",
    ):
        assert is_dynamic(name), name
    for name in ("broker.id", "num.partitions", "log.message.format.version", "listeners"):
        assert not is_dynamic(name), name
    check_change({"log.retention.ms", "leader.replication.throttled.rate"}, False, (), known)


def test_changes_kafka_refuses_are_refused_with_its_error_and_words() -> None:
    assert refusal({"broker.id"}) == (
        ErrorCode.INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(broker.id)",
    )
    assert refusal({"ssl.keystore.location"}) == (
        ErrorCode.INVALID_REQUEST,
        "These security configs can be dynamically updated only per-listener using the"
        " listener prefix: Set(ssl.keystore.location)",
    )
    assert refusal({"listener.name.ssl.ssl.keystore.location"}, per_broker=False) == (
        ErrorCode.INVALID_REQUEST,
        "Cannot update these configs at default cluster level, broker id must be specified:"
        " Set(listener.name.ssl.ssl.keystore.location)",
    )
    assert refusal({"listener.name.plain.ssl.keystore.location"})[0] == ErrorCode.INVALID_CONFIG
    assert refusal({"no.such.config"}) == (
        ErrorCode.INVALID_CONFIG,
        "Unknown broker configs: Set(no.such.config)",
    )


def test_incremental_operations_change_one_level() -> None:
    layer, changed = incremental_layer(
        {"log.retention.ms": "1000", "message.max.bytes": "2000"},
        [
            ("log.retention.ms", OP_DELETE, None),
            ("log.segment.bytes", OP_SET, "1048576"),
            ("log.cleanup.policy", OP_APPEND, "compact"),
        ],
        {"log.cleanup.policy": "delete"},
    )
    assert layer == {
        "message.max.bytes": "2000",
        "log.segment.bytes": "1048576",
        "log.cleanup.policy": "delete,compact",
    }
    assert changed == {"log.retention.ms", "log.segment.bytes", "log.cleanup.policy"}
    layer, _ = incremental_layer(layer, [("log.cleanup.policy", OP_SUBTRACT, "delete")], {})
    assert layer["log.cleanup.policy"] == "compact"
    for operations, code in (
        ([("a", OP_SET, "1"), ("a", OP_DELETE, None)], ErrorCode.INVALID_REQUEST),
        ([("log.retention.ms", OP_SET, None)], ErrorCode.INVALID_REQUEST),
        ([("log.retention.ms", OP_APPEND, "1")], ErrorCode.INVALID_CONFIG),
        ([("log.retention.ms", 7, "1")], ErrorCode.INVALID_REQUEST),
    ):
        with pytest.raises(DynamicConfigError) as caught:
            incremental_layer({}, operations, {})
        assert caught.value.error_code == code, operations


def test_a_brokers_own_config_wins_over_the_default_which_wins_over_the_file() -> None:
    static = BrokerConfig()
    static.apply_properties({"log.retention.hours": "24", "message.max.bytes": "3000000"})
    config = effective(static, {"message.max.bytes": "4000000"}, {})
    assert config.log_config().max_message_bytes == 4_000_000
    assert config.log_config().retention_ms == 24 * 3_600_000
    # A finer unit wins over a coarser one at whatever level, as in Kafka.
    config = effective(static, {"log.retention.ms": "5000"}, {"message.max.bytes": "5000000"})
    assert config.log_config().retention_ms == 5000
    assert config.log_config().max_message_bytes == 5_000_000
    assert static.log_config().max_message_bytes == 3_000_000  # untouched
    assert synonyms("log.retention.hours") == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert synonyms("listener.name.ssl.ssl.keystore.location") == (
        "listener.name.ssl.ssl.keystore.location",
        "ssl.keystore.location",
    )


class Recorder:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def reconfigures(self, name: str) -> bool:
        return name == "leader.replication.throttled.rate"

    def validate(self, new: BrokerConfig) -> None:
        pass

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        self.seen.append(new.leader_replication_throttled_rate)


def test_a_change_reaches_the_parts_it_concerns_and_other_brokers_are_ignored() -> None:
    static = BrokerConfig(node_id=2)
    dynamic = DynamicBrokerConfig(static)
    recorder = Recorder()
    dynamic.add_reconfigurable(recorder)
    dynamic.apply("brokers/<default>", {"leader.replication.throttled.rate": "1000"})
    dynamic.apply("brokers/2", {"leader.replication.throttled.rate": "500"})
    dynamic.apply("brokers/3", {"leader.replication.throttled.rate": "1"})
    dynamic.apply("brokers/<default>", {"log.retention.ms": "100"})
    assert recorder.seen == [1000, 500]
    assert dynamic.current.log_config().retention_ms == 100
    dynamic.apply("brokers/2", {})
    assert recorder.seen[-1] == static.leader_replication_throttled_rate
    # A stored level that cannot be used leaves the settings as they were.
    dynamic.apply("brokers/2", {"log.retention.ms": "soon"})
    assert dynamic.current.log_config().retention_ms == 100


def test_passwords_are_encrypted_as_kafka_encrypts_them() -> None:
    encoded = encode_password("the secret", "keystore-pass")
    fields = dict(item.split(":", 1) for item in encoded.split(","))
    assert fields["cipherAlgorithm"] == "AES/CBC/PKCS5Padding"
    assert fields["keyFactoryAlgorithm"] == "PBKDF2WithHmacSHA512"
    assert (fields["keyLength"], fields["iterations"]) == ("128", "4096")
    assert "keystore-pass" not in encoded
    assert decode_password("the secret", encoded) == "keystore-pass"
    with pytest.raises(PasswordDecodeError):
        decode_password("another secret", encoded)


def test_log_levels_by_log4js_names() -> None:
    name = "herdless.tests.dynamic_config_probe"
    probe = logging.getLogger(name)
    assert loggers.loggers()[name] == loggers.level_name(logging.getLogger().getEffectiveLevel())
    loggers.check_operations([(name, OP_SET, "TRACE")])
    loggers.apply_operations([(name, OP_SET, "TRACE")])
    assert probe.isEnabledFor(logging.DEBUG - 1)
    assert loggers.loggers()[name] == "TRACE"
    loggers.apply_operations([(name, OP_DELETE, None)])
    assert probe.level == logging.NOTSET
    for operations, code, words in (
        ([("no.such.logger", OP_SET, "INFO")], ErrorCode.INVALID_CONFIG, "does not exist"),
        ([(name, OP_SET, "LOUD")], ErrorCode.INVALID_CONFIG, "Valid log levels are DEBUG"),
        ([("root", OP_DELETE, None)], ErrorCode.INVALID_REQUEST, "root logger is not allowed"),
        ([(name, OP_APPEND, "INFO")], ErrorCode.INVALID_REQUEST, "APPEND operation"),
    ):
        with pytest.raises(DynamicConfigError) as caught:
            loggers.check_operations(operations)
        assert caught.value.error_code == code
        assert words in str(caught.value)

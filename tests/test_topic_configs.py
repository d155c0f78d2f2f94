"""Topic configs through the clients' admin APIs and the CLI, and what they change.

confluent-kafka's incremental_alter_configs (IncrementalAlterConfigs), kafka-python's
alter_configs (AlterConfigs, which replaces the explicit set), DescribeConfigs after
each, a restart keeping them; a topic's compression.type as stored on disk;
min.insync.replicas and message.timestamp.before.max.ms as producers meet them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from tests.support.broker import BrokerProcess
from tests.support.cli import herdless, refused, table_rows
from tests.support.data import stored_codecs
from tests.support.wire import Wire

_ADMINS: dict[str, AdminClient] = {}


@pytest.fixture(autouse=True, scope="module")
def _admins_let_go() -> Iterator[None]:
    """The module's admin clients go with its broker: one kept to the end of the run
    tries to reach the stopped broker, and says so, until pytest exits."""
    yield
    _ADMINS.clear()


def admin(broker: BrokerProcess) -> AdminClient:
    # Kept alive: a client collected before its futures resolve fails them (_DESTROY).
    if broker.bootstrap not in _ADMINS:
        _ADMINS[broker.bootstrap] = AdminClient({"bootstrap.servers": broker.bootstrap})
    return _ADMINS[broker.bootstrap]


def create(broker: BrokerProcess, name: str, **configs: str) -> None:
    topic = NewTopic(name, 1, 1, config={k.replace("_", "."): v for k, v in configs.items()})
    admin(broker).create_topics([topic])[name].result(30)


def described(broker: BrokerProcess, name: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    return admin(broker).describe_configs([resource])[resource].result(30)


def incremental(broker: BrokerProcess, name: str, *entries: ConfigEntry, **kwargs: Any) -> None:
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=list(entries))
    admin(broker).incremental_alter_configs([resource], **kwargs)[resource].result(30)


def op(name: str, operation: AlterConfigOpType, value: str | None = None) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=operation)


def test_incremental_alter_sets_appends_and_deletes(broker: BrokerProcess) -> None:
    create(broker, "ica", retention_ms="3600000")
    incremental(
        broker,
        "ica",
        op("segment.ms", AlterConfigOpType.SET, "7200000"),
        op("cleanup.policy", AlterConfigOpType.APPEND, "compact"),
        op("retention.ms", AlterConfigOpType.DELETE),
        op("unclean.leader.election.enable", AlterConfigOpType.SET, "true"),
    )
    configs = described(broker, "ica")
    assert configs["segment.ms"].value == "7200000"
    assert not configs["segment.ms"].is_default
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].is_default
    assert configs["unclean.leader.election.enable"].value == "true"
    # Admin UIs show each config's type (DescribeConfigs v3+), as kafka-python decodes it.
    typed = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        entries = typed.describe_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "ica")], config_filter="all"
        )["topic"]["ica"]
    finally:
        typed.close()
    kinds = {name: entry["config_type"] for name, entry in entries.items()}
    assert kinds["cleanup.policy"] == "LIST" and kinds["segment.ms"] == "LONG"
    assert kinds["preallocate"] == "BOOLEAN" and kinds["min.cleanable.dirty.ratio"] == "DOUBLE"

    incremental(broker, "ica", op("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete"))
    assert described(broker, "ica")["cleanup.policy"].value == "compact"
    # validate_only checks and changes nothing.
    incremental(broker, "ica", op("segment.ms", AlterConfigOpType.SET, "1000"), validate_only=True)
    assert described(broker, "ica")["segment.ms"].value == "7200000"


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        (op("retention.hours", AlterConfigOpType.SET, "1"), "retention.hours"),
        (op("segment.bytes", AlterConfigOpType.SET, "lots"), "segment.bytes"),
        (op("segment.ms", AlterConfigOpType.APPEND, "5"), "not a list"),
        (op("remote.storage.enable", AlterConfigOpType.SET, "true"), "tiered storage"),
        (op("min.compaction.lag.ms", AlterConfigOpType.SET, "10"), "max.compaction.lag.ms"),
    ],
)
def test_bad_changes_are_refused_with_the_name(
    broker: BrokerProcess, entry: ConfigEntry, named: str
) -> None:
    name = f"bad-{abs(hash(named)) % 10_000}"
    create(broker, name, max_compaction_lag_ms="5")
    with pytest.raises(KafkaException) as caught:
        incremental(broker, name, entry)
    error = caught.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG, error
    assert named in error.str()
    assert described(broker, name)["max.compaction.lag.ms"].value == "5"  # unchanged


def test_altering_a_missing_topic_is_refused(broker: BrokerProcess) -> None:
    with pytest.raises(KafkaException) as caught:
        incremental(broker, "no-such-topic", op("retention.ms", AlterConfigOpType.SET, "1"))
    assert caught.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_legacy_alter_configs_replaces_the_explicit_set(broker: BrokerProcess) -> None:
    create(broker, "legacy", retention_ms="3600000", segment_ms="7200000")
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = client.alter_configs(
            [
                KpConfigResource(
                    ConfigResourceType.TOPIC, "legacy", configs={"retention.ms": "5000"}
                )
            ],
            incremental=False,
            raise_on_unknown=False,
        )
    finally:
        client.close()
    assert result == {"topic": {"legacy": "OK"}}
    configs = described(broker, "legacy")
    assert configs["retention.ms"].value == "5000"
    # kafka-python re-sends the other explicit configs, knowing AlterConfigs replaces them.
    assert configs["segment.ms"].value == "7200000"
    wire = Wire(broker)
    try:
        Resource = AlterConfigsRequest.AlterConfigsResource
        request = AlterConfigsRequest[1](
            resources=[
                Resource(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="legacy",
                    configs=[Resource.AlterableConfig(name="flush.ms", value="1000")],
                )
            ],
            validate_only=False,
        )
        [answer] = wire.call(request, AlterConfigsResponse).responses
    finally:
        wire.close()
    assert answer.error_code == 0, answer
    configs = described(broker, "legacy")
    assert configs["flush.ms"].value == "1000"
    for name in ("retention.ms", "segment.ms"):  # not named in the request: back to defaults
        assert configs[name].is_default, configs[name]


def test_changes_survive_a_restart_and_broker_defaults_apply(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    process = BrokerProcess(
        tmp_path_factory.mktemp("configs") / "data",
        *("--set", "compression.type=zstd", "--set", "log.roll.jitter.ms=5000"),
    ).start()
    try:
        create(process, "kept")
        incremental(process, "kept", op("retention.bytes", AlterConfigOpType.SET, "123456"))
        process.restart()
        configs = described(process, "kept")
        assert configs["retention.bytes"].value == "123456"
        # Broker-wide defaults under Kafka's broker names reach every topic.
        assert configs["compression.type"].value == "zstd"
        assert configs["segment.jitter.ms"].value == "5000"
        assert not configs["segment.jitter.ms"].is_default
    finally:
        _ADMINS.pop(process.bootstrap, None)
        process.stop()


def test_cli_alters_and_names_what_is_wrong(broker: BrokerProcess) -> None:
    create(broker, "cli-alter", retention_ms="3600000")
    b = ("--bootstrap-server", broker.bootstrap)
    changed = herdless(
        "topics", "alter", "cli-alter", "-c", "segment.ms=86400000", "-d", "retention.ms", *b
    )
    assert changed.returncode == 0, changed.stdout + changed.stderr
    configs = described(broker, "cli-alter")
    assert configs["segment.ms"].value == "86400000"
    assert configs["retention.ms"].is_default
    shown = {
        row[0]: row for row in table_rows(herdless("topics", "describe", "cli-alter", *b).stdout)
    }
    assert shown["segment.ms"][1:] == ["86400000", "dynamic_topic_config"]

    assert "segment.ms" in refused(
        herdless("topics", "alter", "cli-alter", "-c", "segment.ms=soon", *b), ""
    )
    refused(herdless("topics", "alter", "cli-alter", *b), "nothing to change", code=2)


@pytest.mark.parametrize("codec", ["zstd", "gzip", "uncompressed"])
def test_topic_compression_type_is_what_lands_on_disk(broker: BrokerProcess, codec: str) -> None:
    topic = f"stored-{codec}"
    create(broker, topic, compression_type=codec)
    sent_codec = "lz4" if codec == "uncompressed" else "none"
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": sent_codec, "linger.ms": 20}
    )
    values = [b"record %d " % i * 10 for i in range(2_000)]
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    assert stored_codecs(broker, topic) == {"none" if codec == "uncompressed" else codec}
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        for message in consumer.consume(500, timeout=1):
            assert message.error() is None, message.error()
            got.append(message.value())
    consumer.close()
    assert got == values


def delivery_errors(broker: BrokerProcess, topic: str, **produce: Any) -> list[KafkaError | None]:
    errors: list[KafkaError | None] = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 5_000}
    )
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err), **produce)
    assert producer.flush(30) == 0
    return errors


def test_acks_all_needs_min_insync_replicas(broker: BrokerProcess) -> None:
    create(broker, "isr", min_insync_replicas="2")
    [error] = delivery_errors(broker, "isr")
    # librdkafka retries NOT_ENOUGH_REPLICAS until the message times out.
    assert error is not None
    assert error.code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT), error
    incremental(broker, "isr", op("min.insync.replicas", AlterConfigOpType.DELETE))
    assert delivery_errors(broker, "isr") == [None]


def test_timestamps_too_old_are_refused(broker: BrokerProcess) -> None:
    create(broker, "recent", message_timestamp_before_max_ms="60000")
    now = int(time.time() * 1000)
    [old] = delivery_errors(broker, "recent", timestamp=now - 3_600_000)
    assert old is not None and old.code() == KafkaError.INVALID_TIMESTAMP, old
    assert delivery_errors(broker, "recent", timestamp=now) == [None]

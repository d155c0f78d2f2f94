"""Dynamic broker configs on a real broker, through real clients: confluent-kafka's
describe_configs and incremental_alter_configs (BROKER), kafka-python's admin (BROKER
and BROKER_LOGGER, AlterConfigs), `herdless configs`, and raw requests for what no
client library sends (the cluster-wide default resource, another broker's id).

What users rely on: a retention default changed at runtime deletes from topics without
an override at once and spares those with one; read-only configs are refused with
Kafka's error and words; log levels change at once and are forgotten at a restart, the
rest is kept; a listener's keystore changed at runtime serves new connections."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from herdless.broker.dynamic_config.store import DYNAMIC_CONFIGS_FILE
from herdless.security.certificates import Issued
from herdless.testing.process import free_port
from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import assert_documented, herdless, refused, succeeded, table_rows
from tests.support.tls import Pki, client_context, now
from tests.support.waiting import wait_for
from tests.support.wire import Wire

NONE, INVALID_CONFIG, INVALID_REQUEST = 0, 40, 42
BROKER, BROKER_LOGGER = 4, 8
SET, DELETE = 0, 1
_ADMINS: dict[str, AdminClient] = {}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("broker-configs") / "data"
    with module_broker(data_dir, "--set", "log.retention.hours=720") as process:
        yield process
        # Its admin clients go with it: one kept to the end of the run tries to reach
        # the stopped broker, and says so, until pytest exits.
        _ADMINS.clear()


def admin(broker: BrokerProcess) -> AdminClient:
    # Kept alive: a client collected before its futures resolve fails them (_DESTROY).
    if broker.bootstrap not in _ADMINS:
        _ADMINS[broker.bootstrap] = AdminClient({"bootstrap.servers": broker.bootstrap})
    return _ADMINS[broker.bootstrap]


def described(broker: BrokerProcess, name: str = "0") -> dict[str, Any]:
    resource = ConfigResource(ResourceType.BROKER, name)
    return admin(broker).describe_configs([resource])[resource].result(30)


def alter(broker: BrokerProcess, **changes: str | None) -> None:
    """IncrementalAlterConfigs of broker 0 (a value sets, None deletes)."""
    entries = [
        ConfigEntry(
            name.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.DELETE
            if value is None
            else AlterConfigOpType.SET,
        )
        for name, value in changes.items()
    ]
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=entries)
    admin(broker).incremental_alter_configs([resource])[resource].result(30)


def refusal(broker: BrokerProcess, name: str, value: str) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        alter(broker, **{name: value})
    return caught.value.args[0]


def raw_alter(
    broker: BrokerProcess, resource_type: int, name: str, *configs: tuple[str, int, str | None]
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs as no client library sends it (the default resource "",
    another broker's id); (error code, message)."""
    wire = Wire(broker)
    try:
        request = IncrementalAlterConfigsRequest[1](
            resources=[(resource_type, name, list(configs))], validate_only=False
        )
        (answer,) = wire.call(request, IncrementalAlterConfigsResponse).responses
    finally:
        wire.close()
    return answer.error_code, answer.error_message


def raw_describe(broker: BrokerProcess, resource_type: int, name: str) -> Any:
    wire = Wire(broker)
    try:
        request = DescribeConfigsRequest[4](
            resources=[(resource_type, name, None)],
            include_synonyms=True,
            include_documentation=False,
        )
        (result,) = wire.call(request, DescribeConfigsResponse).results
    finally:
        wire.close()
    return result


def create_topic(broker: BrokerProcess, name: str, **configs: str) -> None:
    topic = NewTopic(name, 1, 1, config={k.replace("_", "."): v for k, v in configs.items()})
    admin(broker).create_topics([topic])[name].result(30)


def produce(broker: BrokerProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for index in range(count):
        producer.produce(topic, value=b"x" * 200, key=str(index).encode())
        producer.flush(10)  # a batch each: segments of 1024 bytes roll often
    assert producer.flush(10) == 0


def low_watermark(broker: BrokerProcess, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return low


# -- describe ----------------------------------------------------------------------------


def test_a_broker_describes_its_configs_with_sources_synonyms_and_read_only_flags(
    broker: BrokerProcess,
) -> None:
    configs = described(broker)
    hours = configs["log.retention.hours"]
    assert (hours.value, hours.source) == ("720", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert not hours.is_read_only
    # log.retention.ms is in force from the hours given, its synonym.
    assert configs["log.retention.ms"].value == str(720 * 3_600_000)
    assert "log.retention.hours" in configs["log.retention.ms"].synonyms
    assert configs["broker.id"].is_read_only
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["leader.replication.throttled.rate"].is_read_only
    # kafka-python reads the same, with Kafka's source names.
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        found = client.describe_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "0", configs=["log.retention.hours"])],
            config_filter="all",
        )
    finally:
        client.close()
    entry = found["broker"]["0"]["log.retention.hours"]
    assert (entry["value"], entry["config_source"]) == ("720", "STATIC_BROKER_CONFIG")


# -- changes -----------------------------------------------------------------------------


def test_a_retention_default_changed_at_runtime_applies_to_topics_without_an_override(
    broker: BrokerProcess,
) -> None:
    create_topic(broker, "follows-default", segment_bytes="1024")
    create_topic(broker, "own-retention", segment_bytes="1024", retention_ms="-1")
    for topic in ("follows-default", "own-retention"):
        produce(broker, topic, 40)
        assert low_watermark(broker, topic) == 0
    b = ("-b", broker.bootstrap)
    succeeded(herdless("configs", "--broker-defaults", "-c", "log.retention.ms=1", *b))
    try:
        # Applied at once, not at the next retention check (every 5 minutes).
        deadline = time.monotonic() + 10
        while low_watermark(broker, "follows-default") == 0:
            assert time.monotonic() < deadline, "the new retention deleted nothing"
            time.sleep(0.2)
        assert low_watermark(broker, "own-retention") == 0
        result = raw_describe(broker, BROKER, "")
        assert result.error_code == NONE
        assert [(c.name, c.value, c.config_source) for c in result.configs] == [
            ("log.retention.ms", "1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        ]
        entry = described(broker)["log.retention.ms"]
        assert (entry.value, entry.source) == (
            "1",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )
        topic = (
            admin(broker)
            .describe_configs([resource := ConfigResource(ResourceType.TOPIC, "follows-default")])[
                resource
            ]
            .result(30)
        )
        assert (topic["retention.ms"].value, topic["retention.ms"].source) == (
            "1",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )
    finally:
        succeeded(herdless("configs", "--broker-defaults", "-d", "log.retention.ms", *b))
    assert described(broker)["log.retention.ms"].value == str(720 * 3_600_000)
    rows = table_rows(succeeded(herdless("configs", "--broker-defaults", *b)))
    assert rows == []


def test_a_brokers_own_config_wins_over_the_default_and_goes_back_to_it(
    broker: BrokerProcess,
) -> None:
    assert raw_alter(broker, BROKER, "", ("message.max.bytes", SET, "2000000")) == (NONE, None)
    alter(broker, message_max_bytes="3000000")
    entry = described(broker)["message.max.bytes"]
    assert (entry.value, entry.source) == ("3000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert "message.max.bytes" in entry.synonyms
    alter(broker, message_max_bytes=None)
    entry = described(broker)["message.max.bytes"]
    assert (entry.value, entry.source) == (
        "2000000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert raw_alter(broker, BROKER, "", ("message.max.bytes", DELETE, None)) == (NONE, None)
    assert described(broker)["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


def test_a_record_size_limit_changed_at_runtime_holds_producers_at_once(
    broker: BrokerProcess,
) -> None:
    create_topic(broker, "size-limited")

    def delivered(size: int) -> KafkaError | None:
        outcome: list[KafkaError | None] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10_000})
        producer.produce(
            "size-limited", b"v" * size, on_delivery=lambda error, _m: outcome.append(error)
        )
        assert producer.flush(30) == 0
        return outcome[0]

    alter(broker, message_max_bytes="2000")
    try:
        error = delivered(10_000)
        assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
        assert delivered(500) is None
    finally:
        alter(broker, message_max_bytes=None)
    assert delivered(10_000) is None


def test_changes_kafka_refuses_are_refused_with_its_error_and_words(
    broker: BrokerProcess,
) -> None:
    error = refusal(broker, "broker.id", "7")
    assert error.code() == KafkaError.INVALID_REQUEST
    assert error.str() == "Cannot update these configs dynamically: Set(broker.id)"
    error = refusal(broker, "ssl.keystore.location", "/etc/keystore.pem")
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "only per-listener using the listener prefix" in error.str()
    error = refusal(broker, "log.retention.ms", "soon")
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "log.retention.ms must be an integer, not 'soon'" in error.str()
    error = refusal(broker, "log.cleanup.policy", "sometimes")
    assert error.code() == KafkaError.INVALID_CONFIG
    assert refusal(broker, "no.such.config", "1").code() == KafkaError.INVALID_CONFIG
    # As Kafka with ZooKeeper: a broker changes its own configs, no other's.
    code, message = raw_alter(broker, BROKER, "7", ("message.max.bytes", SET, "2000000"))
    assert (code, message) == (
        INVALID_REQUEST,
        "Unexpected broker id, expected 0, but received 7",
    )
    code, message = raw_alter(broker, BROKER, "one", ("message.max.bytes", SET, "2000000"))
    assert (code, message) == (INVALID_REQUEST, "Node id must be an integer, but it is: one")
    # A listener's keystore is each broker's own.
    code, message = raw_alter(
        broker, BROKER, "", ("listener.name.ssl.ssl.keystore.location", SET, "/x")
    )
    assert code == INVALID_REQUEST
    assert "broker id must be specified" in (message or "")
    # Nothing refused was stored.
    assert described(broker)["broker.id"].value == "0"
    assert (
        not (broker.data_dir / DYNAMIC_CONFIGS_FILE).exists()
        or "broker.id" not in (broker.data_dir / DYNAMIC_CONFIGS_FILE).read_text()
    )
    refused(
        herdless("configs", "--broker", "0", "-c", "num.partitions=3", "-b", broker.bootstrap),
        "Cannot update these configs dynamically: Set(num.partitions) (INVALID_REQUEST)",
    )


def test_legacy_alter_configs_replaces_the_brokers_own_configs(broker: BrokerProcess) -> None:
    def legacy(**configs: str) -> int:
        wire = Wire(broker)
        try:
            request = AlterConfigsRequest[1](
                resources=[(BROKER, "0", list(configs.items()))], validate_only=False
            )
            (answer,) = wire.call(request, AlterConfigsResponse).responses
        finally:
            wire.close()
        return answer.error_code

    assert legacy(**{"log.segment.bytes": "2000000", "compression.type": "zstd"}) == NONE
    assert described(broker)["log.segment.bytes"].value == "2000000"
    assert legacy(**{"compression.type": "lz4"}) == NONE
    configs = described(broker)
    assert configs["compression.type"].value == "lz4"
    # Not named the second time: back to what the file and Kafka's defaults say.
    assert configs["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert legacy(**{"broker.id": "3"}) == INVALID_REQUEST
    alter(broker, compression_type=None)


def test_log_levels_change_at_once(broker: BrokerProcess) -> None:
    logger = "herdless.broker.handlers.broker_configs"
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)

    def levels() -> dict[str, str]:
        found = client.describe_configs(
            [KpConfigResource(ConfigResourceType.BROKER_LOGGER, "0")], config_filter="all"
        )
        return {name: entry["value"] for name, entry in found["broker_logger"]["0"].items()}

    def set_level(level: str | None) -> Any:
        change = ("DELETE", None) if level is None else level
        resource = KpConfigResource(ConfigResourceType.BROKER_LOGGER, "0", configs={logger: change})
        return client.alter_configs([resource], incremental=True, raise_on_unknown=False)

    try:
        before = levels()
        assert before["root"] == "INFO"
        assert before[logger] == "INFO"
        assert set_level("WARN") == {"broker_logger": {"0": "OK"}}
        assert levels()[logger] == "WARN"
        # Quiet now: the change below is not logged.
        alter(broker, log_flush_interval_messages="1000000")
        changed = "dynamic configs of broker 0 changed: ['log.flush.interval.messages']"
        assert changed not in broker.log_tail()
        assert set_level(None) == {"broker_logger": {"0": "OK"}}
        assert levels()[logger] == "INFO"
        alter(broker, log_flush_interval_messages=None)
        assert changed in broker.log_tail()
        outcome = set_level("LOUD")["broker_logger"]["0"]
        assert "Cannot set the log level of" in outcome and "Valid log levels are" in outcome
        resource = KpConfigResource(
            ConfigResourceType.BROKER_LOGGER, "0", configs={"kafka.server.KafkaApis": "DEBUG"}
        )
        outcome = client.alter_configs([resource], incremental=True, raise_on_unknown=False)
        assert "Logger kafka.server.KafkaApis does not exist!" in outcome["broker_logger"]["0"]
    finally:
        client.close()
    code, message = raw_alter(broker, BROKER_LOGGER, "0", ("root", DELETE, None))
    assert (code, message) == (
        INVALID_REQUEST,
        "Removing the log level of the root logger is not allowed",
    )
    result = raw_describe(broker, BROKER_LOGGER, "")
    assert (result.error_code, result.error_message) == (
        INVALID_REQUEST,
        "Broker id must not be empty",
    )


def test_configs_command_shows_json_as_documented(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    succeeded(herdless("configs", "--broker", "0", "-c", "log.roll.ms=3600000", *b))
    try:
        document = json.loads(succeeded(herdless("configs", "--broker", "0", "-o", "json", *b)))
        assert_documented("configs", document)
        rows = {r["name"]: r for r in document["configs"]}
        assert rows["log.roll.ms"]["value"] == "3600000"
        assert rows["log.roll.ms"]["source"] == "dynamic broker"
        assert "num.partitions" not in rows  # Kafka's default: shown with --all
        everything = json.loads(
            succeeded(herdless("configs", "--broker", "0", "--all", "-o", "json", *b))
        )
        assert "num.partitions" in {r["name"] for r in everything["configs"]}
        loggers = json.loads(
            succeeded(herdless("configs", "--broker-logger", "0", "-o", "json", *b))
        )
        assert {"name": "root", "value": "INFO"}.items() <= next(
            r for r in loggers["configs"] if r["name"] == "root"
        ).items()
    finally:
        succeeded(herdless("configs", "--broker", "0", "-d", "log.roll.ms", *b))
    refused(
        herdless("configs", "--broker", "0", "--broker-defaults", *b),
        "give one of --broker ID, --broker-defaults or --broker-logger ID",
        code=2,
    )
    refused(herdless("configs", "--broker", "5", *b), "the cluster has no broker 5")


# -- a broker of its own -----------------------------------------------------------------


def test_dynamic_configs_survive_a_restart_and_log_levels_do_not(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "data").start()
    try:
        b = ("-b", process.bootstrap)
        succeeded(herdless("configs", "--broker", "0", "-c", "message.max.bytes=3000000", *b))
        succeeded(herdless("configs", "--broker-defaults", "-c", "log.retention.hours=48", *b))
        succeeded(herdless("configs", "--broker-logger", "0", "-c", "herdless.broker=DEBUG", *b))
        process.restart()
        configs = described(process)
        assert (configs["message.max.bytes"].value, configs["message.max.bytes"].source) == (
            "3000000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )
        assert configs["log.retention.ms"].value == str(48 * 3_600_000)
        assert configs["log.retention.hours"].source == (
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        )
        rows = {
            r[0]: r[1]
            for r in table_rows(succeeded(herdless("configs", "--broker-logger", "0", *b)))
        }
        assert rows["herdless.broker"] == "INFO"
    finally:
        _ADMINS.pop(process.bootstrap, None)
        process.stop()


def tls_broker(directory: Path, pki: Pki, *extra_args: str) -> tuple[BrokerProcess, int]:
    """A broker with a TLS listener named SSL beside its PLAINTEXT one; its TLS port."""
    tls_port = free_port()
    settings = [
        arg
        for key, value in pki.server_settings().items()
        for arg in ("--set", f"listener.name.ssl.{key}={value}")
    ]
    process = BrokerProcess(
        directory / "data", *settings, *extra_args, listeners=f"SSL://127.0.0.1:{tls_port}"
    )
    return process.start(), tls_port


def connected(port: int) -> socket.socket | None:
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=10)
    except ConnectionRefusedError:
        return None


def renewed_certificate(pki: Pki, path: Path, password: bytes | None = None) -> Issued:
    """The broker's certificate issued again (same subject and names), in a keystore."""
    issued = pki.ca.issue("broker", now(), hosts=["localhost", "127.0.0.1"], server=True)
    path.write_bytes(issued.keystore_pem(password))
    return issued


LOCATION = "listener.name.ssl.ssl.keystore.location"
KEY_PASSWORD = "listener.name.ssl.ssl.key.password"


def test_a_listeners_keystore_changed_at_runtime_serves_new_connections(tmp_path: Path) -> None:
    pki = Pki.create(tmp_path)
    renewed = renewed_certificate(pki, tmp_path / "renewed.pem")
    process, tls_port = tls_broker(tmp_path, pki)
    try:
        assert served_certificate(pki, tls_port) == pki.broker.certificate_der
        b = ("-b", process.bootstrap)
        # A file that cannot be read is refused, not stored: the listener keeps serving.
        refused(
            herdless("configs", "--broker", "0", "-c", f"{LOCATION}={tmp_path}/none.pem", *b),
            "INVALID_CONFIG",
        )
        # Passwords are stored only encrypted: not without password.encoder.secret.
        refused(
            herdless("configs", "--broker", "0", "-c", f"{KEY_PASSWORD}=x", *b),
            "Password encoder secret not configured",
        )
        succeeded(
            herdless("configs", "--broker", "0", "-c", f"{LOCATION}={tmp_path}/renewed.pem", *b)
        )
        assert served_certificate(pki, tls_port) == renewed.certificate_der
        rows = {r[0]: r for r in table_rows(succeeded(herdless("configs", "--broker", "0", *b)))}
        assert rows[LOCATION][1:] == [str(tmp_path / "renewed.pem"), "dynamic broker"]
    finally:
        _ADMINS.pop(process.bootstrap, None)
        process.stop()


def test_a_key_password_is_stored_encrypted_with_the_encoder_secret(tmp_path: Path) -> None:
    pki = Pki.create(tmp_path)
    locked = renewed_certificate(pki, tmp_path / "locked.pem", b"key-secret")
    process, tls_port = tls_broker(tmp_path, pki, "--set", "password.encoder.secret=s3cret")
    try:
        b = ("-b", process.bootstrap)
        changes = ("-c", f"{LOCATION}={tmp_path}/locked.pem", "-c", f"{KEY_PASSWORD}=key-secret")
        succeeded(herdless("configs", "--broker", "0", *changes, *b))
        assert served_certificate(pki, tls_port) == locked.certificate_der
        stored = (process.data_dir / DYNAMIC_CONFIGS_FILE).read_text()
        assert "key-secret" not in stored
        assert "encryptedPassword" in stored
        document = json.loads(succeeded(herdless("configs", "--broker", "0", "-o", "json", *b)))
        (row,) = [r for r in document["configs"] if r["name"] == KEY_PASSWORD]
        assert (row["value"], row["sensitive"], row["source"]) == (None, True, "dynamic broker")
        # Decrypted at start: the listener serves the locked key's certificate again.
        process.restart()
        assert served_certificate(pki, tls_port) == locked.certificate_der
    finally:
        _ADMINS.pop(process.bootstrap, None)
        process.stop()


def served_certificate(pki: Pki, port: int) -> bytes:
    context = client_context(pki.ca_file)
    # A restarted broker may answer on its PLAINTEXT port a moment before its TLS one.
    raw = wait_for(lambda: connected(port), f"the TLS listener on port {port}")
    with context.wrap_socket(raw, server_hostname="localhost") as sock:
        der = sock.getpeercert(binary_form=True)
    assert der is not None
    return der

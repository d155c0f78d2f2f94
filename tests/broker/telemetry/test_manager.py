"""The broker's side of client telemetry alone, on a fake clock: instance ids, when a
client may ask and push, the errors Kafka answers, what a push leaves for /metrics, and
when a client is forgotten."""

from __future__ import annotations

import uuid

import cramjam
import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from herdless.broker.telemetry.exporter import client_metrics, pushed_client
from herdless.broker.telemetry.manager import (
    CACHE_EXPIRY_MS,
    ClientAttributes,
    ClientMetricsManager,
    TelemetryError,
)
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import Compression

CLIENT = ClientAttributes("orders", "confluent-kafka-python", "2.16.1", "127.0.0.1", 50000)
ZERO = uuid.UUID(int=0)
INTERVAL = 1000


def metrics_data(queue_time: float = 2.5, sent: int = 7) -> bytes:
    gauge = Metric(
        name="org.apache.kafka.producer.record.queue.time.avg",
        description="The average time in ms a record spends in the producer queue.",
        gauge=Gauge(data_points=[NumberDataPoint(as_double=queue_time)]),
    )
    node = [KeyValue(key="node.id", value=AnyValue(string_value="0"))]
    counter = Metric(
        name="org.apache.kafka.producer.request.total",
        sum=Sum(is_monotonic=True, data_points=[NumberDataPoint(as_int=sent, attributes=node)]),
    )
    scope = ScopeMetrics(metrics=[gauge, counter])
    return MetricsData(
        resource_metrics=[ResourceMetrics(scope_metrics=[scope])]
    ).SerializeToString()


@pytest.fixture
def manager() -> ClientMetricsManager:
    found = ClientMetricsManager(telemetry_max_bytes=4096)
    found.apply(
        "producers",
        {
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": str(INTERVAL),
            "match": "client_id=orders",
        },
    )
    return found


def refused(error: ErrorCode, call: object, *args: object) -> None:
    with pytest.raises(TelemetryError) as raised:
        call(*args)  # type: ignore[operator]
    assert raised.value.error_code == error


def test_a_client_without_an_id_is_given_one_and_its_subscription(
    manager: ClientMetricsManager,
) -> None:
    first = manager.get_subscriptions(ZERO, CLIENT, 0)
    assert first.instance_id != ZERO
    assert first.metrics == ("org.apache.kafka.producer.",)
    assert first.push_interval_ms == INTERVAL
    assert first.telemetry_max_bytes == 4096
    assert list(first.accepted_compression_types) == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
    other = manager.get_subscriptions(ZERO, CLIENT, 0)
    assert other.instance_id != first.instance_id
    assert other.subscription_id != first.subscription_id


def test_a_client_no_subscription_matches_is_asked_for_nothing() -> None:
    manager = ClientMetricsManager()
    manager.apply("other", {"metrics": "*", "match": "client_id=someone-else"})
    found = manager.get_subscriptions(ZERO, CLIENT, 0)
    assert found.metrics == ()
    assert found.push_interval_ms == 5 * 60 * 1000


def test_asking_again_within_the_interval_is_throttled(manager: ClientMetricsManager) -> None:
    instance = manager.get_subscriptions(ZERO, CLIENT, 0).instance_id
    refused(ErrorCode.THROTTLING_QUOTA_EXCEEDED, manager.get_subscriptions, instance, CLIENT, 500)
    assert manager.get_subscriptions(instance, CLIENT, INTERVAL).instance_id == instance


def test_pushes_follow_the_interval_but_the_first_after_asking_is_taken_at_once(
    manager: ClientMetricsManager,
) -> None:
    found = manager.get_subscriptions(ZERO, CLIENT, 0)
    push = manager.push
    sub, data = found.subscription_id, metrics_data()
    push(found.instance_id, CLIENT, sub, False, Compression.NONE, data, 10, 0)
    refused(
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        push,
        found.instance_id,
        CLIENT,
        sub,
        False,
        Compression.NONE,
        data,
        600,
        0,
    )
    push(found.instance_id, CLIENT, sub, False, Compression.NONE, data, 1010, 0)
    # Terminating: taken whenever it comes; nothing after it.
    push(found.instance_id, CLIENT, sub, True, Compression.NONE, data, 1100, 0)
    refused(
        ErrorCode.INVALID_REQUEST,
        push,
        found.instance_id,
        CLIENT,
        sub,
        False,
        Compression.NONE,
        data,
        5000,
        0,
    )


@pytest.mark.parametrize(
    ("subscription_offset", "compression", "payload", "error"),
    [
        (1, Compression.NONE, metrics_data(), ErrorCode.UNKNOWN_SUBSCRIPTION_ID),
        (0, 9, metrics_data(), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
        (0, Compression.NONE, b"\x00" * 5000, ErrorCode.TELEMETRY_TOO_LARGE),
        (0, Compression.NONE, b"\xff\xff\xff", ErrorCode.INVALID_RECORD),
        (0, Compression.ZSTD, b"not zstd at all", ErrorCode.INVALID_RECORD),
    ],
)
def test_a_bad_push_gets_kafkas_error(
    manager: ClientMetricsManager,
    subscription_offset: int,
    compression: int,
    payload: bytes,
    error: ErrorCode,
) -> None:
    found = manager.get_subscriptions(ZERO, CLIENT, 0)
    refused(
        error,
        manager.push,
        found.instance_id,
        CLIENT,
        found.subscription_id + subscription_offset,
        False,
        compression,
        payload,
        10,
        0,
    )


@pytest.mark.parametrize("instance", [ZERO, uuid.UUID(int=1)])
def test_a_push_without_a_real_instance_id_is_an_invalid_request(
    manager: ClientMetricsManager, instance: uuid.UUID
) -> None:
    refused(
        ErrorCode.INVALID_REQUEST,
        manager.push,
        instance,
        CLIENT,
        0,
        False,
        Compression.NONE,
        b"",
        0,
        0,
    )


def test_a_changed_subscription_gives_a_new_id_and_the_old_one_is_unknown(
    manager: ClientMetricsManager,
) -> None:
    found = manager.get_subscriptions(ZERO, CLIENT, 0)
    manager.apply("producers", {"metrics": "*", "interval.ms": "2000"})
    refused(
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
        manager.push,
        found.instance_id,
        CLIENT,
        found.subscription_id,
        False,
        Compression.NONE,
        metrics_data(),
        10,
        0,
    )
    again = manager.get_subscriptions(found.instance_id, CLIENT, 20)  # not throttled
    assert again.metrics == ("*",)
    assert again.push_interval_ms == 2000
    assert again.subscription_id != found.subscription_id


@pytest.mark.parametrize(
    "codec", [Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY]
)
def test_a_push_is_exported_with_the_clients_labels(
    manager: ClientMetricsManager, codec: Compression
) -> None:
    found = manager.get_subscriptions(ZERO, CLIENT, 0)
    compress = {
        Compression.ZSTD: cramjam.zstd.compress,
        Compression.LZ4: cramjam.lz4.compress,
        Compression.GZIP: cramjam.gzip.compress,
        Compression.SNAPPY: cramjam.snappy.compress_raw,
    }[codec]
    payload = bytes(compress(metrics_data(queue_time=2.5, sent=7)))
    manager.push(found.instance_id, CLIENT, found.subscription_id, False, codec, payload, 10, 0)
    families = {
        f.name: f for f in client_metrics([pushed_client(i) for i in manager.instances(10)])
    }
    gauge = families["org_apache_kafka_producer_record_queue_time_avg"]
    assert gauge.type == "gauge"
    [sample] = gauge.samples
    assert sample.value == 2.5
    assert sample.labels["client_id"] == "orders"
    assert sample.labels["client_software_name"] == "confluent-kafka-python"
    assert sample.labels["client_software_version"] == "2.16.1"
    counter = families["org_apache_kafka_producer_request"]
    assert counter.type == "counter"
    [sample] = counter.samples
    assert sample.name == "org_apache_kafka_producer_request_total"
    assert (sample.value, sample.labels["node_id"]) == (7, "0")


def test_a_silent_client_is_forgotten_after_three_intervals_or_a_minute() -> None:
    manager = ClientMetricsManager()
    manager.apply("slow", {"metrics": "*", "interval.ms": "60000"})
    found = manager.get_subscriptions(ZERO, CLIENT, 0)
    manager.push(found.instance_id, CLIENT, found.subscription_id, False, 0, metrics_data(), 5, 0)
    assert len(manager.instances(3 * 60000)) == 1
    assert manager.instances(3 * 60000 + 6) == []
    manager.apply("slow", {"metrics": "*", "interval.ms": "1000"})
    manager.get_subscriptions(ZERO, CLIENT, 0)
    assert len(manager.instances(CACHE_EXPIRY_MS)) == 1
    assert manager.instances(CACHE_EXPIRY_MS + 1) == []


def test_a_client_is_forgotten_when_its_connection_closes(manager: ClientMetricsManager) -> None:
    found = manager.get_subscriptions(ZERO, CLIENT, 0)
    assert manager.watch_connection(7, found.instance_id)
    assert not manager.watch_connection(7, found.instance_id)
    manager.connection_closed(7)
    assert manager.instances(0) == []


def test_an_unusable_subscription_written_around_the_broker_is_left_out() -> None:
    manager = ClientMetricsManager()
    manager.apply("bad", {"interval.ms": "5"})
    assert manager.configs() == {}
    assert manager.get_subscriptions(ZERO, CLIENT, 0).metrics == ()

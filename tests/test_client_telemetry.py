"""Client telemetry (KIP-714) on a real broker with real clients: subscriptions added with
`herdless client-metrics`, a confluent-kafka (librdkafka 2.16) producer and consumer
pushing the metrics subscribed for, which /metrics shows labelled with each client, a
client no subscription matches pushing nothing, a closed client's series dropped, and
Kafka's error codes for bad subscriptions and bad pushes; the console's Clients page."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from herdless.console.server import Console
from herdless.protocol.telemetry_messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from herdless.testing.process import free_port
from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import assert_documented, herdless, refused, succeeded
from tests.support.members import wait_until
from tests.support.wire import Wire

NONE, INVALID_RECORD, THROTTLED, INVALID_REQUEST = 0, 87, 89, 42
UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE = 117, 118
INTERVAL_MS = 500
MAX_BYTES = 65536
PRODUCER, CONSUMER, UNWATCHED = "telemetry-producer", "telemetry-consumer", "unwatched-producer"


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("telemetry") / "data"
    with module_broker(
        data_dir, "--metrics-port", str(metrics_port), "--set", f"telemetry.max.bytes={MAX_BYTES}"
    ) as process:
        yield process


def metrics_url(metrics_port: int) -> str:
    return f"http://127.0.0.1:{metrics_port}/metrics"


def pushed(metrics_port: int) -> dict[str, set[str]]:
    """The client metrics on /metrics: by client id, the names of its series."""
    text = urllib.request.urlopen(metrics_url(metrics_port), timeout=10).read()
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if "client_instance_id" in sample.labels:
                found.setdefault(sample.labels["client_id"], set()).add(sample.name)
    return found


def labels_of(metrics_port: int, client_id: str) -> dict[str, str]:
    text = urllib.request.urlopen(metrics_url(metrics_port), timeout=10).read()
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.labels.get("client_id") == client_id:
                return sample.labels
    return {}


def add(broker: BrokerProcess, *args: str) -> str:
    return succeeded(
        herdless("client-metrics", "add", *args, "--bootstrap-server", broker.bootstrap)
    )


def test_subscribed_clients_push_their_metrics_to_metrics_and_others_push_nothing(
    broker: BrokerProcess, metrics_port: int
) -> None:
    add(
        broker,
        "producers",
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval-ms",
        str(INTERVAL_MS),
        "--match",
        f"client_id={PRODUCER}",
    )
    add(
        broker,
        "consumers",
        "--metrics",
        "org.apache.kafka.consumer.",
        "--interval-ms",
        str(INTERVAL_MS),
        "--match",
        f"client_id={CONSUMER}",
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": PRODUCER})
    unwatched = Producer({"bootstrap.servers": broker.bootstrap, "client.id": UNWATCHED})
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": CONSUMER,
            "group.id": "telemetry-readers",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["telemetry-events"])
        for i in range(50):
            producer.produce("telemetry-events", f"event {i}".encode())
            unwatched.produce("telemetry-events", b"unwatched")
        producer.flush(30)
        unwatched.flush(30)

        def both_pushed() -> bool:
            consumer.poll(0.1)  # librdkafka pushes from its own threads; this serves the group
            found = pushed(metrics_port)
            return any(
                n.startswith("org_apache_kafka_producer_") for n in found.get(PRODUCER, ())
            ) and any(n.startswith("org_apache_kafka_consumer_") for n in found.get(CONSUMER, ()))

        wait_until(
            both_pushed,
            20,
            "the producer's and the consumer's metrics on /metrics",
            lambda: str(pushed(metrics_port)),
        )
        found = pushed(metrics_port)
        assert "org_apache_kafka_producer_record_queue_time_avg" in found[PRODUCER]
        # Each pushes what its subscription asks for, nothing else.
        assert all(n.startswith("org_apache_kafka_producer_") for n in found[PRODUCER])
        assert all(n.startswith("org_apache_kafka_consumer_") for n in found[CONSUMER])
        # No subscription matches it: it pushes nothing (Kafka's default).
        assert UNWATCHED not in found
        labels = labels_of(metrics_port, PRODUCER)
        assert labels["client_software_name"] == "confluent-kafka-python"
        assert "rdkafka" in labels["client_software_version"]
        assert len(labels["client_instance_id"]) == 22  # Kafka's uuid text
        # The console's Clients page shows each with what it pushed.
        console = Console("127.0.0.1", 0, 0.5, metrics_urls=[metrics_url(metrics_port)])
        console.start(broker.bootstrap)
        try:
            shown = urllib.request.urlopen(f"{console.url}clients", timeout=10).read().decode()
        finally:
            console.stop()
        instance = labels["client_instance_id"]
        assert f'<a href="#client-{instance}">{PRODUCER}</a>' in shown
        assert "org_apache_kafka_consumer_" in shown
        assert UNWATCHED not in shown
    finally:
        consumer.close()
        unwatched.flush(5)
    # A closed client's last push is terminating and its connections close: its series
    # go from /metrics.
    producer.flush(5)
    del producer
    wait_until(
        lambda: PRODUCER not in pushed(metrics_port) and CONSUMER not in pushed(metrics_port),
        10,
        "the closed clients' series gone",
        lambda: str(pushed(metrics_port)),
    )


def test_subscriptions_are_listed_and_removed(broker: BrokerProcess) -> None:
    add(broker, "everything", "--metrics", "*", "--interval-ms", "60000")
    add(
        broker,
        "everything",
        "--match",
        "client_software_name=apache-kafka-java",
        "--match",
        "client_id=batch-.*",
    )
    listed = json.loads(
        succeeded(
            herdless("client-metrics", "list", "-o", "json", "--bootstrap-server", broker.bootstrap)
        )
    )
    assert_documented("client-metrics list", listed)
    by_name = {s["name"]: s for s in listed}
    assert by_name["everything"] == {
        "name": "everything",
        "metrics": ["*"],
        "interval_ms": 60000,
        "match": ["client_software_name=apache-kafka-java", "client_id=batch-.*"],
    }
    succeeded(
        herdless("client-metrics", "remove", "everything", "--bootstrap-server", broker.bootstrap)
    )
    listed = json.loads(
        succeeded(
            herdless("client-metrics", "list", "-o", "json", "--bootstrap-server", broker.bootstrap)
        )
    )
    assert "everything" not in {s["name"] for s in listed}
    refused(
        herdless("client-metrics", "remove", "everything", "--bootstrap-server", broker.bootstrap),
        "no client metrics subscription named 'everything'",
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ("--interval-ms", "50"),
            "interval must be between 100 and 3600000 (1 hour) (INVALID_REQUEST)",
        ),
        (("--match", "client_name=x"), "Illegal client matching pattern: client_name=x"),
        (("--match", "client_id=(open"), "(INVALID_CONFIG)"),
    ],
)
def test_a_bad_subscription_is_refused_in_the_brokers_words(
    broker: BrokerProcess, args: tuple[str, ...], words: str
) -> None:
    refused(
        herdless("client-metrics", "add", "bad", *args, "--bootstrap-server", broker.bootstrap),
        words,
    )


def test_the_command_names_a_missing_setting(broker: BrokerProcess) -> None:
    refused(
        herdless("client-metrics", "add", "empty", "--bootstrap-server", broker.bootstrap),
        "give --metrics, --interval-ms or --match",
        code=2,
    )


def test_bad_telemetry_requests_get_kafkas_errors(broker: BrokerProcess) -> None:
    add(
        broker,
        "wire",
        "--metrics",
        "org.",
        "--interval-ms",
        "3600000",
        "--match",
        "client_id=wire-test",
    )
    wire = Wire(broker)
    try:
        asked = wire.call(
            GetTelemetrySubscriptionsRequest[0](client_instance_id=uuid.UUID(int=0)),
            GetTelemetrySubscriptionsResponse,
        )
        assert asked.error_code == NONE
        instance, subscription = asked.client_instance_id, asked.subscription_id
        assert instance != uuid.UUID(int=0)
        assert asked.requested_metrics == ["org."]
        assert asked.push_interval_ms == 3600000
        assert asked.telemetry_max_bytes == MAX_BYTES
        again = wire.call(
            GetTelemetrySubscriptionsRequest[0](client_instance_id=instance),
            GetTelemetrySubscriptionsResponse,
        )
        assert again.error_code == THROTTLED

        def push(instance_id: uuid.UUID, subscription_id: int, metrics: bytes) -> int:
            request = PushTelemetryRequest[0](
                client_instance_id=instance_id,
                subscription_id=subscription_id,
                terminating=False,
                compression_type=0,
                metrics=metrics,
            )
            return wire.call(request, PushTelemetryResponse).error_code

        assert push(uuid.UUID(int=0), subscription, b"") == INVALID_REQUEST
        assert push(instance, subscription + 1, b"") == UNKNOWN_SUBSCRIPTION_ID
        # Told its subscription is unknown, a client may ask again at once.
        asked = wire.call(
            GetTelemetrySubscriptionsRequest[0](client_instance_id=instance),
            GetTelemetrySubscriptionsResponse,
        )
        assert (asked.error_code, asked.subscription_id) == (NONE, subscription)
        assert push(instance, subscription, b"\x00" * (MAX_BYTES + 1)) == TELEMETRY_TOO_LARGE
        # That push used up the interval.
        assert push(instance, subscription, b"") == THROTTLED
        fresh = wire.call(
            GetTelemetrySubscriptionsRequest[0](client_instance_id=uuid.UUID(int=0)),
            GetTelemetrySubscriptionsResponse,
        )
        unreadable = b"\xff\xff\xff not protobuf"
        assert push(fresh.client_instance_id, fresh.subscription_id, unreadable) == INVALID_RECORD
    finally:
        wire.close()


def test_subscriptions_outlive_a_restart(broker: BrokerProcess) -> None:
    add(broker, "kept", "--metrics", "org.apache.kafka.", "--interval-ms", "1000")
    broker.stop()
    broker.start()
    listed = json.loads(
        succeeded(
            herdless("client-metrics", "list", "-o", "json", "--bootstrap-server", broker.bootstrap)
        )
    )
    assert {
        "name": "kept",
        "metrics": ["org.apache.kafka."],
        "interval_ms": 1000,
        "match": [],
    } in listed

"""Client quotas on a real broker: DescribeClientQuotas and AlterClientQuotas with Kafka's
error codes, the quotas file across a restart, and a byte-rate quota on a client id
holding a real producer and a real consumer to it while an unthrottled client beside
each goes at its own pace; throttling shown on /metrics."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient

from herdless.admin.client_quotas import alter_quotas, describe_quotas
from herdless.broker.quotas.store import QUOTAS_FILE
from herdless.protocol.client_quotas import DEFAULT, QuotaEntity
from herdless.testing.process import free_port
from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import assert_documented, herdless, refused, succeeded, table_rows
from tests.support.quotas import alter, describe, entities
from tests.support.requests import produce_request, v2_batch
from tests.support.wire import Wire

NONE, UNSUPPORTED_VERSION, INVALID_REQUEST = 0, 35, 42
MB = 1_000_000
VALUE = b"x" * 10_000


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("quotas") / "data"
    with module_broker(data_dir, "--metrics-port", str(metrics_port)) as process:
        yield process


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


# -- the admin APIs ----------------------------------------------------------------------


def test_quotas_are_altered_and_described_by_entity(broker: BrokerProcess) -> None:
    assert (
        alter(
            broker,
            [
                ((("user", "ann"), ("client-id", "etl")), {"producer_byte_rate": 2048.0}),
                ((("user", "ann"),), {"consumer_byte_rate": 4096.0, "request_percentage": 25.0}),
                ((("user", None),), {"producer_byte_rate": 1024.0}),
                ((("client-id", None),), {"consumer_byte_rate": 512.0}),
            ],
        )
        == [(NONE, None)] * 4
    )
    everything = entities(describe(broker, []))
    assert everything[(("user", "ann"), ("client-id", "etl"))] == {"producer_byte_rate": 2048.0}
    assert everything[(("user", "ann"),)] == {
        "consumer_byte_rate": 4096.0,
        "request_percentage": 25.0,
    }
    assert everything[(("user", None),)] == {"producer_byte_rate": 1024.0}
    assert everything[(("client-id", None),)] == {"consumer_byte_rate": 512.0}
    # Exact user, strict: the user's own entity alone; not strict: its client ids too.
    assert list(entities(describe(broker, [("user", 0, "ann")], strict=True))) == [
        (("user", "ann"),)
    ]
    assert set(entities(describe(broker, [("user", 0, "ann")]))) == {
        (("user", "ann"),),
        (("user", "ann"), ("client-id", "etl")),
    }
    # The default user; any user named with a client id.
    assert list(entities(describe(broker, [("user", 1, None)], strict=True))) == [(("user", None),)]
    assert list(entities(describe(broker, [("user", 2, None), ("client-id", 2, None)]))) == [
        (("user", "ann"), ("client-id", "etl"))
    ]
    # Removing every quota of an entity removes the entity.
    assert (
        alter(
            broker,
            [
                ((("user", None),), {"producer_byte_rate": None}),
                ((("client-id", None),), {"consumer_byte_rate": None}),
            ],
        )
        == [(NONE, None)] * 2
    )
    left = entities(describe(broker, []))
    assert (("user", None),) not in left and (("client-id", None),) not in left


def test_bad_alterations_get_kafkas_errors_and_change_nothing(broker: BrokerProcess) -> None:
    before = entities(describe(broker, []))
    results = alter(
        broker,
        [
            ((("client-id", "c1"),), {"bytes_per_second": 1.0}),
            ((("client-id", "c2"),), {"producer_byte_rate": 1.5}),
            ((), {"producer_byte_rate": 1.0}),
            ((("user", ""),), {"producer_byte_rate": 1.0}),
            ((("group", "g"),), {"producer_byte_rate": 1.0}),
            ((("user", "a"), ("user", "b")), {"producer_byte_rate": 1.0}),
            ((("ip", "127.0.0.1"),), {"connection_creation_rate": 1.0}),
        ],
    )
    assert [code for code, _ in results] == [INVALID_REQUEST] * 7
    assert results[0][1] == "Invalid configuration key bytes_per_second"
    assert results[1][1] == "Configuration producer_byte_rate must be a LONG value"
    assert results[2][1] == "Invalid empty client quota entity"
    assert results[3][1] == "Empty user not supported"
    # validate_only checks and writes nothing.
    assert alter(
        broker, [((("client-id", "c3"),), {"producer_byte_rate": 10.0})], validate_only=True
    ) == [(NONE, None)]
    assert entities(describe(broker, [])) == before


def test_bad_filters_get_kafkas_errors(broker: BrokerProcess) -> None:
    def error(components: list[tuple[str, int, str | None]]) -> tuple[int, str]:
        response = describe(broker, components)
        assert response.entries is None
        return response.error_code, response.error_message

    assert error([("user", 0, "a"), ("user", 0, "b")]) == (
        INVALID_REQUEST,
        "Duplicate user filter component entity type",
    )
    assert error([("", 0, "a")])[0] == INVALID_REQUEST
    assert error([("user", 0, None)])[0] == INVALID_REQUEST
    assert error([("user", 7, None)])[0] == INVALID_REQUEST
    assert error([("ip", 2, None), ("user", 2, None)])[0] == INVALID_REQUEST
    assert error([("topic", 2, None)]) == (
        UNSUPPORTED_VERSION,
        "Custom entity type 'topic' not supported",
    )
    assert entities(describe(broker, [("ip", 2, None)])) == {}


def test_the_admin_layer_reads_and_writes_quotas(
    broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    entity = QuotaEntity(DEFAULT, "admin-app")
    alter_quotas(admin, entity, {"producer_byte_rate": 3000}, [])
    assert describe_quotas(admin, entity) == [(entity, {"producer_byte_rate": 3000.0})]
    alter_quotas(admin, entity, {}, ["producer_byte_rate"])
    assert describe_quotas(admin, entity) == []


def test_quotas_are_kept_in_the_data_directory(broker: BrokerProcess) -> None:
    assert alter(broker, [((("client-id", "kept"),), {"consumer_byte_rate": 777.0})]) == [
        (NONE, None)
    ]
    kept = json.loads((broker.data_dir / QUOTAS_FILE).read_text())
    assert kept["entities"]["clients/kept"] == {"consumer_byte_rate": "777"}
    broker.stop()
    broker.start()
    assert entities(describe(broker, [("client-id", 0, "kept")], strict=True)) == {
        (("client-id", "kept"),): {"consumer_byte_rate": 777.0}
    }


# -- enforcement -------------------------------------------------------------------------


def produce_for(
    broker: BrokerProcess,
    client_id: str,
    topic: str,
    seconds: float,
    measured: tuple[float, float],
    pace: float | None = None,
) -> dict[str, float]:
    """Produce as fast as the broker lets `client_id` (or at `pace` bytes/s) for
    `seconds`; the payload bytes acknowledged between measured[0] and measured[1]
    seconds from the start, per second, and the throttle librdkafka reported."""
    started = time.monotonic()
    acked_at: list[float] = []
    throttled: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked_at.append(time.monotonic() - started)

    def throttle(event: Any) -> None:
        throttled.append(event.throttle_time)

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 100_000,
            # A queue of a few seconds' worth, not librdkafka's 1 GB.
            "queue.buffering.max.kbytes": 8_000,
            "throttle_cb": throttle,
        }
    )
    sent = 0
    while time.monotonic() - started < seconds:
        if pace is not None and sent > pace * (time.monotonic() - started):
            producer.poll(0.01)
            continue
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
            sent += len(VALUE)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(10)
    low, high = measured
    in_window = sum(1 for t in acked_at if low <= t < high)
    return {
        "rate": in_window * len(VALUE) / (high - low),
        "throttled_ms": float(sum(throttled)),
    }


def test_a_producer_is_held_to_its_client_id_quota_beside_an_unthrottled_one(
    broker: BrokerProcess, admin: KafkaAdminClient, metrics_port: int
) -> None:
    admin_topic = "quota-produce"
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic(admin_topic, 2, 1)])
    alter_quotas(admin, QuotaEntity(client_id="slow-producer"), {"producer_byte_rate": MB}, [])
    # The first 10 s are a burst the window allows (it is never shorter than 10 of its
    # 11 samples); the quota holds from then on: measure 30 s after it.
    results: dict[str, dict[str, float]] = {}

    def run(client_id: str, pace: float | None) -> None:
        results[client_id] = produce_for(broker, client_id, admin_topic, 45.0, (14.0, 44.0), pace)

    fast = threading.Thread(target=run, args=("free-producer", 3 * MB))
    fast.start()
    run("slow-producer", None)
    fast.join()
    slow, free = results["slow-producer"], results["free-producer"]
    assert slow["rate"] == pytest.approx(MB, rel=0.10), slow
    assert slow["throttled_ms"] > 0
    assert free["rate"] == pytest.approx(3 * MB, rel=0.10), free
    assert free["throttled_ms"] == 0
    scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics").read().decode()
    throttles = [
        line
        for line in scraped.splitlines()
        if line.startswith("herdless_client_quota_throttle_time_ms_total{")
        and 'client_id="slow-producer"' in line
        and 'quota="producer_byte_rate"' in line
    ]
    assert throttles and float(throttles[0].rsplit(" ", 1)[1]) > 0
    assert 'client_id="free-producer"' not in scraped


def consume_for(
    broker: BrokerProcess, client_id: str, topic: str, seconds: float, measured: tuple[float, float]
) -> float:
    """Payload bytes per second `client_id` consumed between measured[0] and measured[1]."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": client_id,
            "group.id": client_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    started = time.monotonic()
    low, high = measured
    received = 0
    try:
        while (now := time.monotonic() - started) < seconds:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None and low <= now < high:
                received += len(message.value())
    finally:
        consumer.close()
    return received / (high - low)


def test_a_consumer_is_held_to_its_client_id_quota_beside_an_unthrottled_one(
    broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    from kafka.admin import NewTopic

    topic = "quota-consume"
    admin.create_topics([NewTopic(topic, 1, 1)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for _ in range(3_000):  # 30 MB: more than either consumer reads
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    alter_quotas(admin, QuotaEntity(client_id="slow-consumer"), {"consumer_byte_rate": MB}, [])
    rates: dict[str, float] = {}

    def run(client_id: str, measured: tuple[float, float]) -> None:
        rates[client_id] = consume_for(broker, client_id, topic, measured[1], measured)

    # The unthrottled one is measured over its first seconds, while it still has
    # records to read: it goes far faster than the quota it does not have.
    free = threading.Thread(target=run, args=("free-consumer", (0.0, 4.0)))
    free.start()
    run("slow-consumer", (2.0, 22.0))
    free.join()
    assert rates["slow-consumer"] == pytest.approx(MB, rel=0.10), rates
    assert rates["free-consumer"] > 3 * MB, rates


# -- the command -------------------------------------------------------------------------


def test_the_cli_alters_and_describes_quotas_through_a_broker(broker: BrokerProcess) -> None:
    def quotas(*args: str) -> Any:
        return herdless("quotas", *args, "-b", broker.bootstrap)

    succeeded(
        quotas(
            "alter",
            "--user",
            "cli-user",
            "--client-id",
            "cli-app",
            "--add-config",
            "producer_byte_rate=1024,consumer_byte_rate=2048",
        )
    )
    succeeded(quotas("alter", "--client-defaults", "--add-config", "request_percentage=50"))
    assert table_rows(
        succeeded(quotas("describe", "--user", "cli-user", "--client-id", "cli-app"))
    ) == [
        ["user=cli-user,client-id=cli-app", "consumer_byte_rate", "2048.0"],
        ["user=cli-user,client-id=cli-app", "producer_byte_rate", "1024.0"],
    ]
    assert ["client-id=<default>", "request_percentage", "50.0"] in table_rows(
        succeeded(quotas("describe"))
    )
    shown = json.loads(succeeded(quotas("describe", "--client-defaults", "-o", "json")))
    assert shown == [
        {"entity": "client-id=<default>", "quota": "request_percentage", "value": 50.0}
    ]
    assert_documented("quotas describe", shown)
    succeeded(quotas("alter", "--client-defaults", "--delete-config", "request_percentage"))
    assert table_rows(succeeded(quotas("describe", "--client-defaults"))) == []
    refused(quotas("alter", "--user", "x", "--add-config", "producer_byte_rate=1.5"), "LONG", 2)
    refused(
        quotas("alter", "--user", "x", "--add-config", "bytes=1"), "Invalid configuration key", 2
    )
    refused(quotas("alter", "--user", "x", "--add-config", "producer_byte_rate"), "key=value", 2)
    refused(quotas("alter", "--add-config", "producer_byte_rate=1"), "name the entity", 2)
    refused(quotas("alter", "--user", "x"), "nothing to alter", 2)
    refused(quotas("describe", "--user", "x", "--user-defaults"), "not both", 2)


def test_the_cli_alters_quotas_offline_in_a_data_directory(tmp_path: Path) -> None:
    offline = ("--data-dir", str(tmp_path / "data"))
    succeeded(
        herdless(
            "quotas",
            "alter",
            "--user-defaults",
            "--add-config",
            "producer_byte_rate=5000",
            *offline,
        )
    )
    assert table_rows(succeeded(herdless("quotas", "describe", *offline))) == [
        ["user=<default>", "producer_byte_rate", "5000.0"]
    ]
    process = BrokerProcess(tmp_path / "data")
    process.start()
    try:
        assert entities(describe(process, [("user", 1, None)], strict=True)) == {
            (("user", None),): {"producer_byte_rate": 5000.0}
        }
        refused(
            herdless(
                "quotas", "alter", "--user", "a", "--add-config", "producer_byte_rate=1", *offline
            ),
            "in use by a running broker",
        )
    finally:
        process.stop()


@pytest.mark.parametrize(
    "entity",
    [
        (("client-id", "wire-test"),),
        # A PLAINTEXT listener's clients are User:ANONYMOUS.
        (("user", "ANONYMOUS"), ("client-id", None)),
    ],
)
def test_request_time_is_throttled_with_throttle_time_ms(
    broker: BrokerProcess, entity: tuple[tuple[str, str | None], ...]
) -> None:
    # A quota of no time at all: the first request earns a throttle, answered at once.
    assert alter(broker, [(entity, {"request_percentage": 0.0001})]) == [(NONE, None)]
    try:
        started = time.monotonic()
        first = describe(broker, [])
        assert first.throttle_time_ms > 0
        assert time.monotonic() - started < first.throttle_time_ms / 1000
    finally:
        alter(broker, [(entity, {"request_percentage": None})])
    assert describe(broker, []).throttle_time_ms == 0


@pytest.mark.parametrize(("version", "held_back"), [(5, True), (9, False)])
def test_a_produce_older_than_kip_219_is_answered_once_its_throttle_is_over(
    broker: BrokerProcess, admin: KafkaAdminClient, version: int, held_back: bool
) -> None:
    """Before KIP-219 (Produce v6) a client did not wait by itself: Kafka holds the answer
    back for the throttle time; from v6 it answers at once and mutes the connection."""
    from kafka.admin import NewTopic
    from kafka.protocol.producer import ProduceResponse

    topic = f"quota-old-produce-{version}"
    admin.create_topics([NewTopic(topic, 1, 1)])
    entity = (("client-id", "wire-test"),)
    # 10 kB/s: a 25 kB request in the first window earns a throttle of over a second.
    assert alter(broker, [(entity, {"producer_byte_rate": 10_000.0})]) == [(NONE, None)]
    wire = Wire(broker)
    try:
        batch = v2_batch([(None, b"x" * 25_000, int(time.time() * 1000))])
        started = time.monotonic()
        response = wire.call(
            produce_request(version, topic, batch, acks=1), ProduceResponse[version]
        )
        elapsed = time.monotonic() - started
    finally:
        wire.close()
        alter(broker, [(entity, {"producer_byte_rate": None})])
    throttle_s = response.throttle_time_ms / 1000  # type: ignore[attr-defined]
    assert throttle_s >= 1.0
    assert (elapsed >= throttle_s) == held_back, (elapsed, throttle_s)

"""The console's Clients page without a broker: clients' pushed metrics as a broker
exports them (broker/telemetry/exporter.py), read back per client and drawn, and what
the page says with no metrics endpoint, an unreadable one, or no client pushing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from herdless.admin.client_telemetry import PushingClient, clients_from_exposition
from herdless.broker.telemetry.exporter import PushedClient, client_metrics
from herdless.broker.telemetry.otlp import Point
from herdless.console.clients import ClientTelemetry
from herdless.console.pages import Pages
from herdless.console.sampler import Sampler

URL = "http://127.0.0.1:9404/metrics"
ODD_CLIENT = '<b>"odd"</b>'


def exposition(clients: Sequence[PushedClient]) -> str:
    class Pushed(Collector):
        def collect(self) -> Iterator[Metric]:
            yield from client_metrics(clients)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Pushed())
    return generate_latest(registry).decode()


PRODUCER = PushedClient(
    "WInmotvtQ3emxdzoB-Sltg",
    ODD_CLIENT,
    "confluent-kafka-python",
    "2.16.1-rdkafka-2.16.0",
    (
        Point("org.apache.kafka.producer.record.queue.time.avg", (), 0.5, False),
        Point("org.apache.kafka.producer.node.request.latency.avg", (("node.id", "1"),), 2, False),
        Point("org.apache.kafka.producer.connection.creation.total", (), 3, True),
    ),
)


def test_a_brokers_export_reads_back_per_client() -> None:
    other = PushedClient("AAAAAAAAAAAAAAAAAAAAAQ", "etl", "apache-kafka-java", "4.1.0", ())
    [client] = clients_from_exposition(exposition([PRODUCER, other]), URL)
    assert (client.instance_id, client.client_id, client.software_name) == (
        "WInmotvtQ3emxdzoB-Sltg",
        ODD_CLIENT,
        "confluent-kafka-python",
    )
    assert client.source == URL
    assert [(m.name, m.attributes, m.value) for m in client.metrics] == [
        ("org_apache_kafka_producer_connection_creation_total", (), 3.0),
        ("org_apache_kafka_producer_node_request_latency_avg", ("node_id=1",), 2.0),
        ("org_apache_kafka_producer_record_queue_time_avg", (), 0.5),
    ]


def page(read: object, urls: Sequence[str] = (URL,)) -> str:
    sampler = Sampler("127.0.0.1:9092", interval_s=2.0)  # never started: no broker asked
    telemetry = ClientTelemetry(urls, 2.0, read=read)  # type: ignore[arg-type]
    response = Pages(sampler, telemetry=telemetry).get("/clients")
    assert response.status == 200
    return response.body.decode()


def test_the_page_lists_each_client_with_what_it_pushed() -> None:
    def read(urls: Sequence[str]) -> tuple[list[PushingClient], dict[str, str]]:
        return clients_from_exposition(exposition([PRODUCER]), urls[0]), {}

    shown = page(read)
    assert 'data-client-instance="WInmotvtQ3emxdzoB-Sltg"' in shown
    assert "&lt;b&gt;&#34;odd&#34;&lt;/b&gt;" in shown and ODD_CLIENT not in shown
    assert "org_apache_kafka_producer_record_queue_time_avg" in shown
    assert "node_id=1" in shown
    assert 'href="/clients" aria-current="page"' in shown


def test_the_page_says_why_it_shows_no_client() -> None:
    assert "--metrics-url" in page(lambda urls: ([], {}), urls=())
    assert "No client pushes metrics" in page(lambda urls: ([], {}))
    refused = page(lambda urls: ([], {urls[0]: "Connection refused"}))
    assert f"Cannot read {URL}: Connection refused." in refused


def test_the_brokers_are_read_at_most_once_an_interval() -> None:
    reads: list[float] = []
    now = [100.0]

    def read(urls: Sequence[str]) -> tuple[list[PushingClient], dict[str, str]]:
        reads.append(now[0])
        return [], {}

    telemetry = ClientTelemetry((URL,), 2.0, clock=lambda: now[0], read=read)
    telemetry.look()
    now[0] += 1.9
    telemetry.look()
    now[0] += 0.1
    telemetry.look()
    assert reads == [100.0, 102.0]

"""Clients' pushed metrics on the broker's /metrics: each metric under its OpenTelemetry
name made a Prometheus one (`org.apache.kafka.producer.record.queue.time.avg` becomes
`org_apache_kafka_producer_record_queue_time_avg`), labelled with the client it came from
(client_instance_id, client_id, client_software_name, client_software_version) and the
data point's own attributes. Monotonic sums are counters (their samples end in `_total`),
the rest gauges. A client's series go when the broker forgets the client (manager.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric

from herdless.broker.telemetry.manager import ClientInstance
from herdless.broker.telemetry.otlp import Point
from herdless.protocol.kafka_uuid import kafka_uuid_str

_NOT_PROMETHEUS = re.compile(r"[^a-zA-Z0-9_]")
CLIENT_LABELS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
)


@dataclass(frozen=True, slots=True)
class PushedClient:
    """A copy of one client instance's last push, taken on the loop at a scrape."""

    instance_id: str
    client_id: str
    software_name: str
    software_version: str
    points: Sequence[Point]

    @property
    def labels(self) -> dict[str, str]:
        return dict(
            zip(
                CLIENT_LABELS,
                (self.instance_id, self.client_id, self.software_name, self.software_version),
                strict=True,
            )
        )


def prometheus_name(name: str) -> str:
    cleaned = _NOT_PROMETHEUS.sub("_", name)
    return f"_{cleaned}" if cleaned[:1].isdigit() else cleaned


def pushed_client(instance: ClientInstance) -> PushedClient:
    client = instance.client
    return PushedClient(
        kafka_uuid_str(instance.instance_id),
        client.client_id,
        client.software_name,
        client.software_version,
        tuple(instance.points),
    )


def client_metrics(clients: Sequence[PushedClient]) -> Iterator[Metric]:
    instances = GaugeMetricFamily(
        "herdless_client_telemetry_instances",
        "Client instances this broker knows from their telemetry requests (Kafka's"
        " client-metrics instance-count), whether or not a subscription asks them to push.",
    )
    instances.add_metric([], len(clients))
    yield instances
    families: dict[str, Metric] = {}
    for client in clients:
        for point in client.points:
            name = prometheus_name(point.name)
            if point.counter:
                # A counter's samples end in _total: a name that already does keeps one.
                name = name.removesuffix("_total")
            family = families.get(name)
            if family is None:
                kind = "counter" if point.counter else "gauge"
                documentation = point.description or f"{point.name}, as clients push it (KIP-714)"
                family = families[name] = Metric(name, documentation, kind)
            labels = client.labels
            for key, value in point.attributes:
                labels.setdefault(prometheus_name(key), value)
            sample = f"{name}_total" if family.type == "counter" else name
            family.add_sample(sample, labels, point.value)
    yield from families.values()

"""The metrics clients push (KIP-714), as a broker exports them on its /metrics
(broker/telemetry/exporter.py): read back per client for the console. No Kafka API
hands them out (Kafka gives them to a receiver plugin), so this reads the brokers'
Prometheus endpoints."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

# The labels the broker puts on every pushed series, naming the client.
INSTANCE, CLIENT_ID, SOFTWARE_NAME, SOFTWARE_VERSION = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
)
_CLIENT_LABELS = frozenset({INSTANCE, CLIENT_ID, SOFTWARE_NAME, SOFTWARE_VERSION})


@dataclass(frozen=True, slots=True)
class PushedMetric:
    name: str
    # The data point's own attributes (node_id, topic, ...), as label=value.
    attributes: tuple[str, ...]
    value: float


@dataclass(frozen=True, slots=True)
class PushingClient:
    instance_id: str
    client_id: str
    software_name: str
    software_version: str
    # The /metrics it was read from (the broker it pushes to).
    source: str
    metrics: tuple[PushedMetric, ...]


def clients_from_exposition(text: str, source: str) -> list[PushingClient]:
    """Every client in a broker's /metrics text, with its metrics sorted by name."""
    found: dict[str, tuple[dict[str, str], list[PushedMetric]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            instance = labels.get(INSTANCE)
            if instance is None or sample.name.endswith("_created"):
                continue
            _, metrics = found.setdefault(instance, (labels, []))
            attributes = tuple(
                f"{k}={v}" for k, v in sorted(labels.items()) if k not in _CLIENT_LABELS
            )
            metrics.append(PushedMetric(sample.name, attributes, sample.value))
    return sorted(
        (
            PushingClient(
                instance,
                labels.get(CLIENT_ID, ""),
                labels.get(SOFTWARE_NAME, ""),
                labels.get(SOFTWARE_VERSION, ""),
                source,
                tuple(sorted(metrics, key=lambda m: (m.name, m.attributes))),
            )
            for instance, (labels, metrics) in found.items()
        ),
        key=lambda c: (c.client_id, c.instance_id),
    )


def read_pushing_clients(
    urls: Iterable[str], timeout_s: float = 2.0
) -> tuple[list[PushingClient], dict[str, str]]:
    """The clients pushing to each broker's /metrics at `urls`, and why any URL could not
    be read, by URL."""
    clients: list[PushingClient] = []
    problems: dict[str, str] = {}
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as answer:
                text = answer.read().decode()
        except (OSError, urllib.error.URLError, UnicodeDecodeError) as exc:
            problems[url] = str(getattr(exc, "reason", None) or exc)
            continue
        try:
            clients.extend(clients_from_exposition(text, url))
        except ValueError as exc:
            problems[url] = f"not Prometheus metrics: {exc}"
    return clients, problems


def metric_names(clients: Sequence[PushingClient]) -> list[str]:
    return sorted({m.name for c in clients for m in c.metrics})

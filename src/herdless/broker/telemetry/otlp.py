"""What a client pushes (KIP-714): OpenTelemetry's MetricsData protobuf, compressed with
one of the codecs the broker accepted, read into plain data points.

The codec ids are Kafka's record compression ids, decompressed as record batches are.
Counters arrive cumulative (the broker asks for cumulative temporality, manager.py);
gauges as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from herdless.protocol.records import Compression, InvalidBatch, decompress

# Kafka's ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES, in its order of preference.
ACCEPTED_COMPRESSION_TYPES = (
    Compression.ZSTD,
    Compression.LZ4,
    Compression.GZIP,
    Compression.SNAPPY,
)


class UnreadableMetrics(ValueError):
    """A payload that does not decompress or does not parse as MetricsData."""


@dataclass(frozen=True, slots=True)
class Point:
    """One data point: the metric's name, its own attributes, its value, and whether it
    is a monotonic counter (else a gauge)."""

    name: str
    attributes: tuple[tuple[str, str], ...]
    value: float
    counter: bool
    description: str = ""


def read_points(compression_type: int, payload: bytes) -> list[Point]:
    """The data points of a push; UnreadableMetrics if it cannot be read."""
    data = MetricsData()
    try:
        data.ParseFromString(bytes(decompress(compression_type, memoryview(payload))))
    except InvalidBatch as exc:
        raise UnreadableMetrics(str(exc).replace("record batch", "the metrics")) from None
    except DecodeError as exc:
        raise UnreadableMetrics(f"the metrics are not OTLP MetricsData: {exc}") from None
    return list(_points(data))


def _points(data: MetricsData) -> Iterator[Point]:
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind in ("gauge", "sum"):
                    # A sum that only grows is a counter; any other sum, as a gauge, may fall.
                    counter = kind == "sum" and metric.sum.is_monotonic
                    for p in getattr(metric, kind).data_points:
                        yield Point(
                            metric.name,
                            _attributes(p.attributes),
                            _number(p),
                            counter,
                            metric.description,
                        )
                elif kind == "histogram":
                    for h in metric.histogram.data_points:
                        labels = _attributes(h.attributes)
                        yield Point(f"{metric.name}.count", labels, float(h.count), True)
                        yield Point(f"{metric.name}.sum", labels, h.sum, True)


def _number(point: object) -> float:
    kind = point.WhichOneof("value")  # type: ignore[attr-defined]
    return float(point.as_int if kind == "as_int" else point.as_double)  # type: ignore[attr-defined]


def _attributes(attributes: list[KeyValue]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((a.key, _text(a.value)) for a in attributes))


def _text(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    return "" if kind is None else str(getattr(value, kind))

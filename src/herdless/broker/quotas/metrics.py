"""Client quotas on /metrics, as Kafka's per-client quota metrics (byte-rate,
request-time, throttle-time) name them: each measured client's rate, its quota, and how
often and how long it was throttled."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from herdless.protocol.client_quotas import QuotaType

# (quota type, (user, client id)) -> (rate now, quota, throttled responses, throttle ms)
QuotaRates = Mapping[tuple[QuotaType, tuple[str, str]], tuple[float, float, int, int]]

_LABELS = ["quota", "user", "client_id"]


def quota_metrics(rates: QuotaRates) -> Iterator[Metric]:
    rate = GaugeMetricFamily(
        "herdless_client_quota_rate",
        "A client's measured rate under its quota: bytes per second (producer_byte_rate,"
        " consumer_byte_rate) or percent of a second spent handling its requests"
        " (request_percentage). A user or client id left empty is shared by all.",
        labels=_LABELS,
    )
    bound = GaugeMetricFamily(
        "herdless_client_quota_limit", "The quota the rate is held to.", labels=_LABELS
    )
    throttled = CounterMetricFamily(
        "herdless_client_quota_throttled_responses",
        "Responses answered with a throttle time, after which the connection was muted.",
        labels=_LABELS,
    )
    throttle_ms = CounterMetricFamily(
        "herdless_client_quota_throttle_time_ms",
        "The throttle time given to the client's responses, in all.",
        labels=_LABELS,
    )
    for (quota, (user, client_id)), (now, limit, count, total_ms) in sorted(
        rates.items(), key=lambda item: (item[0][0].value, item[0][1])
    ):
        labels = [quota.value, user, client_id]
        rate.add_metric(labels, now)
        bound.add_metric(labels, limit)
        throttled.add_metric(labels, count)
        throttle_ms.add_metric(labels, total_ms)
    yield from (rate, bound, throttled, throttle_ms)

"""What each request costs against its client's quotas, and the throttle time it earns,
as Kafka's KafkaApis charges it.

Produce is charged its request's size; a consumer's Fetch the size of the records it
answers with. Kafka answers a Fetch that earns a throttle with no records (taken back off
the rate, its unrecordQuotaSensor), so the client waits out a throttle earned by records
it never got and fetches them again: measured with librdkafka under a 1 MB/s quota, that
held a consumer 16% under its quota. herdless sends the records read and throttles the
client for them, as for Produce: the same throttle, and the client's rate at its quota.

Every request is charged the time spent handling it, as a percentage of one second
(request_percentage), but for requests brokers send each other. The connection answers
at once with the throttle time, then reads nothing from the client for that long
(KIP-219).
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator
from typing import Any

from herdless.broker.handlers.fetch import replica_id_of
from herdless.broker.quotas.manager import ClientQuotaManager
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.client_quotas import QuotaType
from herdless.protocol.codec import Request

# Requests one broker sends another: Kafka's ClusterAction APIs, never throttled.
_BETWEEN_BROKERS = frozenset(
    {
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        ApiKey.READ_SHARE_GROUP_STATE,
        ApiKey.WRITE_SHARE_GROUP_STATE,
        ApiKey.DELETE_SHARE_GROUP_STATE,
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    }
)
# The first versions whose clients wait out throttle_time_ms themselves (KIP-219): an
# older one is answered only once its throttle is over, as Kafka answers it.
_CLIENT_THROTTLES_FROM = {ApiKey.PRODUCE: 6, ApiKey.FETCH: 8}
# Kafka's ClientRequestQuotaManager.NanosToPercentagePerSecond, per second.
_PERCENT_PER_SECOND = 100.0


class TimedHandling:
    """Runs a handler's coroutine, adding up the time spent in its steps alone: a Fetch
    waiting for records or a JoinGroup parked until the group forms is not busy, as
    Kafka's request thread time leaves out the purgatory."""

    def __init__(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self._coroutine = coroutine
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine = self._coroutine
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                awaiting = coroutine.send(sent) if thrown is None else coroutine.throw(thrown)
            except StopIteration as stop:
                self.seconds += time.perf_counter() - started
                return stop.value
            finally:
                thrown = None
            self.seconds += time.perf_counter() - started
            try:
                sent = yield awaiting
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:
                thrown, sent = exc, None


def answered_before_throttle(request: Request) -> bool:
    """Whether a throttled request is answered at once, then its connection muted (KIP-219),
    rather than answered once the throttle is over (a Produce or Fetch of a client older
    than KIP-219, which would not wait by itself)."""
    return request.api_version >= _CLIENT_THROTTLES_FROM.get(ApiKey(request.api_key), 0)


def _fetched_bytes(response: Any) -> int:
    return sum(
        len(partition.records or b"")
        for topic in response.responses
        for partition in topic.partitions
    )


def charge(
    quotas: ClientQuotaManager,
    request: Request,
    frame_size: int,
    response: Any,
    handling_seconds: float | None,
) -> int:
    """Charge the request to its client's quotas; the throttle time, set in `response`
    (None: a Produce with acks=0). 0 within quota."""
    if not quotas.enabled():
        return 0
    session = request.session
    user = session.principal.name if session is not None else ""
    client_id = request.client_id or ""
    api_key = request.api_key
    bandwidth, charged = 0, QuotaType.REQUEST
    if api_key == ApiKey.PRODUCE:
        charged = QuotaType.PRODUCE
        bandwidth = quotas.record(charged, user, client_id, frame_size)
    elif api_key == ApiKey.FETCH:
        if replica_id_of(request.body, request.api_version) >= 0:
            return 0  # a follower's: replication is not a client
        if response is not None and quotas.enabled(QuotaType.FETCH):
            charged = QuotaType.FETCH
            bandwidth = quotas.record(charged, user, client_id, _fetched_bytes(response))
    busy = 0
    if handling_seconds is not None and api_key not in _BETWEEN_BROKERS:
        busy = quotas.record(
            QuotaType.REQUEST, user, client_id, handling_seconds * _PERCENT_PER_SECOND
        )
    throttle = max(bandwidth, busy)
    if throttle <= 0:
        return 0
    quotas.throttled(charged if bandwidth >= busy else QuotaType.REQUEST, user, client_id, throttle)
    if response is not None and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = throttle
    return throttle

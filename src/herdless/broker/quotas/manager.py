"""The quotas in force on this broker and each client's measured rates: Kafka's
ClientQuotaManager (byte rates) and ClientRequestQuotaManager (request time) in one.

Each record returns the throttle time the client has earned, 0 within its quota. The
quotas come from the store (store.py) as each entity's config is read or changed; a
rate is kept per quota type and sensor key (whom the quota is shared by, precedence.py),
and forgotten after an hour unused, as Kafka expires its quota sensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from herdless.broker.quotas.precedence import QuotaMatch, applicable_quota
from herdless.broker.quotas.rate import SampledRate, throttle_time_ms
from herdless.protocol.client_quotas import QuotaEntity, QuotaType, quotas_of

# A quota's rate is divided by at least one window, where Kafka's Rate pads it to all
# windows but one. Kafka's padding lets a client send (samples - 1) windows' worth at
# once; that burst then holds the measured rate over the quota, so the client trickles
# until the burst's sample expires a full span later and it bursts again: measured by a
# flat-out librdkafka producer, 11 MB then 0.1 MB/s for 10 s, every 12 s, under a 1 MB/s
# quota, so no 30 s stretch of it was within 10% of the quota. Divided by the time
# elapsed, the throttle is what it takes to have sent at the quota all along, from the
# first window: the same rate on average, without the sawtooth.
QUOTA_MIN_WINDOWS = 1
# Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds.
INACTIVE_RATE_EXPIRATION_MS = 3600 * 1000
_SWEEP_EVERY = 10_000


@dataclass(slots=True)
class ClientRate:
    """One quota's measure of one sensor key, and what it has cost the client."""

    rate: SampledRate
    bound: float
    last_ms: int
    throttled: int = 0
    throttle_time_ms: int = 0


class ClientQuotaManager:
    def __init__(self, samples: int, window_ms: int, clock: Callable[[], int]) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._clock = clock
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        # Quota types some entity has: a client is only measured for those.
        self._enabled: set[str] = set()
        self._rates: dict[tuple[QuotaType, tuple[str, str]], ClientRate] = {}
        self._records = 0

    # -- the quotas, as the store reads them ------------------------------------------

    def apply(self, entity_path: str, config: Mapping[str, str]) -> None:
        """An entity's config as it now is (its quotas; other settings are ignored)."""
        entity = QuotaEntity.from_path(entity_path)
        quotas = quotas_of(config)
        if quotas:
            self._quotas[entity] = quotas
        else:
            self._quotas.pop(entity, None)
        self._enabled = {key for found in self._quotas.values() for key in found}

    def quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        return {entity: dict(found) for entity, found in self._quotas.items()}

    def enabled(self, quota: QuotaType | None = None) -> bool:
        """Whether some entity has this quota (any quota, for None)."""
        return bool(self._enabled) if quota is None else quota.value in self._enabled

    def quota_for(self, quota: QuotaType, user: str, client_id: str) -> QuotaMatch | None:
        return applicable_quota(self._quotas, quota.value, user, client_id)

    # -- measuring -----------------------------------------------------------------------

    def record(self, quota: QuotaType, user: str, client_id: str, value: float) -> int:
        """Record `value` against the client's quota; the throttle time it has earned."""
        if quota.value not in self._enabled:
            return 0
        match = self.quota_for(quota, user, client_id)
        if match is None:
            return 0
        now = self._clock()
        measured = self._rate(quota, match, now)
        measured.rate.record(value, now)
        throttle = throttle_time_ms(measured.rate, match.bound, now)
        if quota is QuotaType.REQUEST:
            # Kafka bounds a request-time throttle by one window (ClientRequestQuotaManager).
            throttle = min(throttle, self.window_ms)
        return throttle

    def throttled(self, quota: QuotaType, user: str, client_id: str, throttle_ms: int) -> None:
        """Count a response throttled for `throttle_ms` under `quota` (for /metrics)."""
        match = self.quota_for(quota, user, client_id)
        if match is not None:
            measured = self._rates.get((quota, match.sensor))
            if measured is not None:
                measured.throttled += 1
                measured.throttle_time_ms += throttle_ms

    def rates(self) -> dict[tuple[QuotaType, tuple[str, str]], tuple[float, float, int, int]]:
        """Per quota type and (user, client id) sensor key: the rate now, the quota, and
        the responses throttled with their total throttle time."""
        now = self._clock()
        return {
            key: (m.rate.measure(now), m.bound, m.throttled, m.throttle_time_ms)
            for key, m in self._rates.items()
        }

    def _rate(self, quota: QuotaType, match: QuotaMatch, now: int) -> ClientRate:
        key = (quota, match.sensor)
        measured = self._rates.get(key)
        if measured is None:
            measured = self._rates[key] = ClientRate(
                SampledRate(now, self.samples, self.window_ms, QUOTA_MIN_WINDOWS),
                match.bound,
                now,
            )
        measured.bound = match.bound
        measured.last_ms = now
        self._records += 1
        if self._records % _SWEEP_EVERY == 0:
            self._forget_idle(now)
        return measured

    def _forget_idle(self, now: int) -> None:
        idle = [
            key for key, m in self._rates.items() if now - m.last_ms > INACTIVE_RATE_EXPIRATION_MS
        ]
        for key in idle:
            del self._rates[key]

"""The broker's side of client telemetry (KIP-714; Kafka's ClientMetricsManager): which
subscription set each client instance has, when it may ask and push again, and the
metrics it last pushed.

A client with no instance id (the zero uuid) is given one. Its subscription set is
resolved from the subscriptions when it first asks and again whenever they have changed
since (a version counter, as Kafka's subscriptionUpdateVersion). Each instance may ask
or push once per push interval: sooner is THROTTLING_QUOTA_EXCEEDED, except the push
right after a GetTelemetrySubscriptions (clients jitter their interval) and a
terminating push. A push for a subscription id that is no longer the instance's is
UNKNOWN_SUBSCRIPTION_ID, which makes the client ask again, at once. After a terminating push
the instance takes no more.

An instance is forgotten, with the metrics it pushed, once it has been silent for three
push intervals (at least a minute, Kafka's cache expiry), or when the connection it
last used closes, as Kafka drops it on disconnect.

No I/O and no clock of its own: `now_ms` is the broker's monotonic clock.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from herdless.broker.telemetry import subscriptions as subs
from herdless.broker.telemetry.otlp import ACCEPTED_COMPRESSION_TYPES, Point, UnreadableMetrics
from herdless.broker.telemetry.otlp import read_points as read_otlp_points
from herdless.protocol.errors import ErrorCode
from herdless.protocol.kafka_uuid import kafka_uuid_str

log = logging.getLogger(__name__)

# Kafka's telemetry.max.bytes default.
DEFAULT_TELEMETRY_MAX_BYTES = 1024 * 1024
# Kafka's ClientMetricsManager: DEFAULT_CACHE_EXPIRY_MS and CACHE_MAX_SIZE.
CACHE_EXPIRY_MS = 60 * 1000
MAX_INSTANCES = 16384
# Expired instances are looked for at most this often: each look walks them all.
EXPIRY_CHECK_MS = 1000
# A client told one of these may ask for its subscriptions again at once (what Kafka's
# validateGetRequest means to allow).
_ASK_AGAIN_AT_ONCE = frozenset(
    {ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE}
)
# Uuid.RESERVED: the zero uuid and the metadata topic's id.
_RESERVED = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})


class TelemetryError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class ClientAttributes:
    """What the broker knows of a client from its connection (Kafka's
    ClientMetricsInstanceMetadata), by the names `match` selectors use."""

    client_id: str
    software_name: str
    software_version: str
    source_address: str
    source_port: int

    def selectable(self, instance: uuid.UUID) -> dict[str, str | None]:
        return {
            subs.CLIENT_INSTANCE_ID: kafka_uuid_str(instance),
            subs.CLIENT_ID: self.client_id,
            subs.CLIENT_SOFTWARE_NAME: self.software_name,
            subs.CLIENT_SOFTWARE_VERSION: self.software_version,
            subs.CLIENT_SOURCE_ADDRESS: self.source_address,
            subs.CLIENT_SOURCE_PORT: str(self.source_port),
        }


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    client: ClientAttributes
    resolved: subs.Resolved
    version: int
    last_get_ms: int | None = None
    last_push_ms: int | None = None
    # Asked for its subscriptions since its last push: the next push is taken at once.
    asked_since_push: bool = False
    terminating: bool = False
    # What its last request was answered (Kafka's lastKnownError).
    last_error: ErrorCode = ErrorCode.NONE
    last_seen_ms: int = 0
    # The metrics of its last push, and when (wall clock, for the console).
    points: list[Point] = field(default_factory=list)
    pushed_at_wall_ms: int | None = None
    pushes: int = 0

    @property
    def expiry_ms(self) -> int:
        return max(CACHE_EXPIRY_MS, 3 * self.resolved.interval_ms)


@dataclass(frozen=True, slots=True)
class Subscribed:
    """A GetTelemetrySubscriptions answer."""

    instance_id: uuid.UUID
    subscription_id: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    telemetry_max_bytes: int
    accepted_compression_types: tuple[int, ...] = tuple(ACCEPTED_COMPRESSION_TYPES)
    # Cumulative counters: /metrics exports them as Prometheus counters, and a refused
    # push loses nothing (Kafka asks for deltas and leaves sums to its plugin).
    delta_temporality: bool = False


class ClientMetricsManager:
    def __init__(self, telemetry_max_bytes: int = DEFAULT_TELEMETRY_MAX_BYTES) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self._subscriptions: dict[str, subs.Subscription] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._version = 0
        self._instances: dict[uuid.UUID, ClientInstance] = {}
        # The instance each open connection last carried, by the connection's key.
        self._connections: dict[int, uuid.UUID] = {}
        self._expiry_checked_ms: int | None = None

    # -- subscriptions -------------------------------------------------------------------

    def apply(self, name: str, config: Mapping[str, str]) -> None:
        """A subscription's config as it now is ({}: gone). One that cannot be read (written
        around the broker) is logged and left out."""
        self._version += 1
        self._subscriptions.pop(name, None)
        self._configs.pop(name, None)
        if not config:
            return
        try:
            self._subscriptions[name] = subs.subscription(name, config)
        except subs.InvalidSubscription as exc:
            log.error("client metrics subscription %r is unusable, so unused: %s", name, exc)
            return
        self._configs[name] = dict(config)

    def configs(self) -> dict[str, dict[str, str]]:
        """Every subscription's explicit config, by name."""
        return {name: dict(config) for name, config in self._configs.items()}

    def config(self, name: str) -> dict[str, str] | None:
        found = self._configs.get(name)
        return None if found is None else dict(found)

    # -- requests ------------------------------------------------------------------------

    def get_subscriptions(
        self, instance_id: uuid.UUID, client: ClientAttributes, now_ms: int
    ) -> Subscribed:
        """GetTelemetrySubscriptions; TelemetryError if refused."""
        if instance_id in _RESERVED:
            instance_id = self._new_instance_id()
        instance = self._instance(instance_id, client, now_ms)
        asked_or_pushed = [
            t for t in (instance.last_get_ms, instance.last_push_ms) if t is not None
        ]
        if (
            asked_or_pushed
            and now_ms - max(asked_or_pushed) < instance.resolved.interval_ms
            and instance.last_error not in _ASK_AGAIN_AT_ONCE
        ):
            raise TelemetryError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"client {instance_id} asked for its subscriptions before its push interval"
                f" of {instance.resolved.interval_ms} ms passed",
            )
        instance.last_get_ms = now_ms
        instance.asked_since_push = True
        instance.last_error = ErrorCode.NONE
        resolved = instance.resolved
        return Subscribed(
            instance_id,
            resolved.subscription_id,
            resolved.metrics,
            resolved.interval_ms,
            self.telemetry_max_bytes,
        )

    def push(
        self,
        instance_id: uuid.UUID,
        client: ClientAttributes,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        metrics: bytes,
        now_ms: int,
        wall_ms: int,
    ) -> None:
        """PushTelemetry; TelemetryError if refused (the metrics are then dropped)."""
        if instance_id in _RESERVED:
            raise TelemetryError(
                ErrorCode.INVALID_REQUEST, f"invalid client instance id {instance_id}"
            )
        instance = self._instance(instance_id, client, now_ms)
        try:
            self._check_push(
                instance, subscription_id, terminating, compression_type, metrics, now_ms
            )
            points = read_otlp_points(compression_type, metrics) if metrics else []
        except UnreadableMetrics as exc:
            instance.last_error = ErrorCode.INVALID_RECORD
            raise TelemetryError(ErrorCode.INVALID_RECORD, str(exc)) from None
        except TelemetryError as exc:
            instance.last_error = exc.error_code
            raise
        finally:
            instance.terminating = instance.terminating or terminating
        instance.last_error = ErrorCode.NONE
        if points:
            instance.points = points
            instance.pushed_at_wall_ms = wall_ms
            instance.pushes += 1

    def _check_push(
        self,
        instance: ClientInstance,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        metrics: bytes,
        now_ms: int,
    ) -> None:
        name = instance.instance_id
        if instance.terminating:
            raise TelemetryError(
                ErrorCode.INVALID_REQUEST,
                f"client {name} already pushed with terminating set: no push is taken after",
            )
        last_push = instance.last_push_ms
        # The first push after asking is taken whenever it comes: clients jitter the
        # interval between 0.5 and 1.5 times.
        if (
            not instance.asked_since_push
            and not terminating
            and last_push is not None
            and now_ms - last_push < instance.resolved.interval_ms
        ):
            raise TelemetryError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"client {name} pushed before its push interval of"
                f" {instance.resolved.interval_ms} ms passed",
            )
        # As in Kafka, a push in time uses up the interval even if refused below.
        instance.last_push_ms = now_ms
        instance.asked_since_push = False
        if subscription_id != instance.resolved.subscription_id:
            raise TelemetryError(
                ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                f"subscription id {subscription_id} is not client {name}'s",
            )
        if compression_type not in (0, *ACCEPTED_COMPRESSION_TYPES):
            raise TelemetryError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"unknown compression type {compression_type} from client {name}",
            )
        if len(metrics) > self.telemetry_max_bytes:
            raise TelemetryError(
                ErrorCode.TELEMETRY_TOO_LARGE,
                f"{len(metrics)} bytes of metrics from client {name} are more than"
                f" telemetry.max.bytes ({self.telemetry_max_bytes})",
            )

    def _new_instance_id(self) -> uuid.UUID:
        while True:
            found = uuid.uuid4()
            if found not in self._instances and found not in _RESERVED:
                return found

    def _instance(
        self, instance_id: uuid.UUID, client: ClientAttributes, now_ms: int
    ) -> ClientInstance:
        """The instance, its subscription set resolved again if the subscriptions changed
        since; timing and what it pushed carry over (Kafka starts them afresh, which lets
        a client whose set changed ask again at once: so does UNKNOWN_SUBSCRIPTION_ID)."""
        self._maybe_expire(now_ms)
        instance = self._instances.get(instance_id)
        if instance is None:
            if len(self._instances) >= MAX_INSTANCES:
                oldest = min(self._instances.values(), key=lambda i: i.last_seen_ms)
                del self._instances[oldest.instance_id]
            instance = ClientInstance(instance_id, client, self._resolve(instance_id, client), 0)
            instance.version = self._version
            self._instances[instance_id] = instance
        elif instance.version != self._version:
            resolved = self._resolve(instance_id, instance.client)
            if resolved != instance.resolved:
                instance.resolved = resolved
                instance.last_get_ms = instance.last_push_ms = None
                instance.asked_since_push = False
            instance.version = self._version
        instance.last_seen_ms = now_ms
        return instance

    def _resolve(self, instance_id: uuid.UUID, client: ClientAttributes) -> subs.Resolved:
        return subs.resolve(
            self._subscriptions.values(), client.selectable(instance_id), instance_id
        )

    # -- lifetime ------------------------------------------------------------------------

    def _maybe_expire(self, now_ms: int) -> None:
        """expire() at most once in EXPIRY_CHECK_MS: on the way of every request."""
        checked = self._expiry_checked_ms
        if checked is None or not 0 <= now_ms - checked < EXPIRY_CHECK_MS:
            self.expire(now_ms)

    def expire(self, now_ms: int) -> None:
        """Forget the instances silent for longer than their expiry."""
        self._expiry_checked_ms = now_ms
        gone = [
            i.instance_id for i in self._instances.values() if now_ms - i.last_seen_ms > i.expiry_ms
        ]
        for instance_id in gone:
            del self._instances[instance_id]

    def watch_connection(self, connection: int, instance_id: uuid.UUID) -> bool:
        """The connection now carries the instance; True if it carried none before (the
        caller then calls connection_closed when it closes)."""
        new = connection not in self._connections
        self._connections[connection] = instance_id
        return new

    def connection_closed(self, connection: int) -> None:
        """Forget the instance the closed connection last carried, and what it pushed."""
        instance_id = self._connections.pop(connection, None)
        if instance_id is not None:
            self._instances.pop(instance_id, None)

    def instances(self, now_ms: int) -> list[ClientInstance]:
        """The instances known now, expired ones forgotten first."""
        self.expire(now_ms)
        return list(self._instances.values())

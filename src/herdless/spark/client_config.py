"""What the kafka.* options mean here: Java client settings, as herdless's clients take them.

Spark's Kafka connector hands kafka.* options to Kafka's Java client. Here two
clients take them: librdkafka (the planning side's consumers, the writer's
producer, and executor reads over TLS or SASL) and herdless's own Kafka client
(executor reads over plaintext, wire.py). Most Java settings are librdkafka
settings of the same name and meaning; the rest are renamed, translated
(sasl.jaas.config), ignored when they only tune the Java client, or refused
when honouring them is impossible and ignoring them would change what is read
or written. Anything else goes to librdkafka as it is, so librdkafka's own
settings work too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from herdless.protocol.config_values import InvalidConfigValue, parse_boolean
from herdless.security.client_config import ClientConfigError, librdkafka_config
from herdless.spark.errors import HerdlessSparkError

# Java client settings that only tune the Java client, beyond those every client
# drops (security/client_config.py): the group member always uses range (see
# member.py), and the Java names of assignors mean nothing to librdkafka.
IGNORED = frozenset({"partition.assignment.strategy"})

# Settings the source or sink owns, as Spark's Kafka connector refuses them, and why.
_READ_REFUSED = {
    "auto.offset.reset": "set the option startingOffsets to earliest or latest instead",
    "key.deserializer": "keys are always read as bytes; deserialize them with DataFrame operations",
    "value.deserializer": (
        "values are always read as bytes; deserialize them with DataFrame operations"
    ),
    "enable.auto.commit": "the source commits each micro-batch's end offsets itself",
    "enable.auto.offset.store": "the source commits each micro-batch's end offsets itself",
    "interceptor.classes": "interceptors could change records under the source",
}
_WRITE_REFUSED = {
    "key.serializer": "keys are written as the bytes (or UTF-8 text) of the key column",
    "value.serializer": "values are written as the bytes (or UTF-8 text) of the value column",
    "interceptor.classes": "interceptors could change records behind the sink",
    "transactional.id": (
        "the sink names its transactions itself: set the option transactionalIdPrefix "
        "for exactly-once streaming writes"
    ),
}


def _refuse(client: Mapping[str, str], refused: Mapping[str, str]) -> None:
    for key in client:
        if key in refused:
            raise HerdlessSparkError(f"option kafka.{key} is not supported: {refused[key]}")
        if key.endswith((".class", ".classes")):
            raise HerdlessSparkError(
                f"option kafka.{key} is not supported: it names a Java class, and "
                "herdless's Kafka clients are not Java"
            )


def check_read_settings(client: Mapping[str, str]) -> None:
    _refuse(client, _READ_REFUSED)


def check_write_settings(client: Mapping[str, str]) -> None:
    _refuse(client, _WRITE_REFUSED)
    idempotence = client.get("enable.idempotence", "true")
    try:
        idempotent = parse_boolean("kafka.enable.idempotence", idempotence)
    except InvalidConfigValue as exc:
        raise HerdlessSparkError(str(exc)) from None
    if not idempotent:
        raise HerdlessSparkError(
            "option kafka.enable.idempotence=false is not supported: the writer always "
            "uses an idempotent producer"
        )


def librdkafka_settings(client: Mapping[str, str]) -> dict[str, str]:
    """The kafka.* options (prefix stripped) as librdkafka configuration."""
    try:
        return librdkafka_config({k: v for k, v in client.items() if k not in IGNORED})
    except ClientConfigError as exc:
        raise HerdlessSparkError(f"option kafka.{exc}") from None


@dataclass(frozen=True)
class WireSettings:
    """The kafka.* settings plaintext executor reads (wire.py) honour; see docs/spark.md."""

    client_id: str | None = None
    isolation_level: str = "read_committed"  # librdkafka's default, not Java's
    fetch_max_bytes: int | None = None
    max_partition_fetch_bytes: int | None = None
    fetch_max_wait_ms: int | None = None
    receive_buffer_bytes: int | None = None

    @classmethod
    def from_client(cls, client: Mapping[str, str]) -> WireSettings:
        def number(*names: str) -> int | None:
            for name in names:
                if name in client:
                    try:
                        return int(client[name])
                    except ValueError:
                        raise HerdlessSparkError(
                            f"option kafka.{name} must be a whole number, got {client[name]!r}"
                        ) from None
            return None

        return cls(
            client_id=client.get("client.id"),
            isolation_level=client.get("isolation.level", "read_committed"),
            fetch_max_bytes=number("fetch.max.bytes"),
            max_partition_fetch_bytes=number("max.partition.fetch.bytes"),
            fetch_max_wait_ms=number("fetch.max.wait.ms", "fetch.wait.max.ms"),
            receive_buffer_bytes=number("receive.buffer.bytes", "socket.receive.buffer.bytes"),
        )

"""Which group protocol a streaming query's member joins with: KIP-848's where it can.

The classic protocol (JoinGroup/SyncGroup) makes the first member of an empty
group wait group.initial.rebalance.delay.ms for others to join (3 s by default,
in Kafka and in herdless): three seconds before every query's first batch. The
consumer protocol of KIP-848 (ConsumerGroupHeartbeat, assignment computed by
the broker) has no such wait: the first heartbeat's answer carries the
partitions.

So a query joins with the consumer protocol unless

- kafka.group.protocol says which protocol to use (the user's word goes);
- kafka.session.timeout.ms or kafka.heartbeat.interval.ms is set: the consumer
  protocol takes both from the broker, and librdkafka refuses them beside it,
  so a query that sets them meant the classic protocol;
- the broker does not list ConsumerGroupHeartbeat in ApiVersions (Kafka before
  3.7, or without the new group coordinator), or cannot be asked without TLS;
- the group has members that speak the classic protocol (other consumers, or
  queries started by an older herdless): a broker without online migration
  refuses a consumer-protocol member into such a group, and librdkafka then
  retries quietly until groupJoinTimeoutMs.
"""

from __future__ import annotations

from collections.abc import Mapping

from herdless.protocol.api_keys import ApiKey
from herdless.spark.api_versions import served_api_keys
from herdless.spark.client import describe_group, quiet_admin
from herdless.spark.options import ClientOptions

CLASSIC = "classic"
CONSUMER = "consumer"

# Member settings of the classic protocol; the consumer protocol's come from the broker
# (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms).
CLASSIC_ONLY_SETTINGS = ("session.timeout.ms", "heartbeat.interval.ms")
# Listeners that answer ApiVersions before any handshake this module would have to do.
_ASKABLE = frozenset({"plaintext", "sasl_plaintext"})


def settled_by_options(client: Mapping[str, str]) -> str | None:
    """The protocol the kafka.* options decide on, or None when it is the broker's to say."""
    chosen = client.get("group.protocol")
    if chosen is not None:
        return chosen.strip().lower()
    if any(name in client for name in CLASSIC_ONLY_SETTINGS):
        return CLASSIC
    if client.get("security.protocol", "plaintext").strip().lower() not in _ASKABLE:
        return CLASSIC
    return None


def group_protocol(connection: ClientOptions, group_id: str, client_id: str) -> str:
    """The protocol a query's member joins `group_id` with (see the module's notes)."""
    decided = settled_by_options(connection.client)
    if decided is not None:
        return decided
    served = served_api_keys(connection.bootstrap, client_id, connection.connect_timeout_s)
    if served is None or ApiKey.CONSUMER_GROUP_HEARTBEAT not in served:
        return CLASSIC
    if _has_classic_members(connection, group_id):
        return CLASSIC
    return CONSUMER


def _has_classic_members(connection: ClientOptions, group_id: str) -> bool:
    """Does the group have classic members? True also when the broker cannot say."""
    description = describe_group(quiet_admin(connection), connection, group_id)
    if description is None:
        return True
    return description.type.name == "CLASSIC" and bool(description.members)

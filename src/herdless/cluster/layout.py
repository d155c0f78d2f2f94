"""ZooKeeper paths and znode values in Apache Kafka's ZooKeeper layout (Kafka 3.x).

Pure: bytes in, values out. What herdless writes is byte for byte what a Kafka 3.x broker
(Scala 2.13 build) writes for the same values, so Kafka's ZooKeeper tools read it and a diff
against a Kafka cluster's znodes shows only real differences. Kafka builds these JSON
objects from Scala and Java hash maps and Jackson writes them in the maps' iteration order;
the functions at the end of this module reproduce those orders.

Decoding accepts whatever Kafka 3.x may have written (any key order, older versions where
the field survives) and raises MalformedZNode, naming the path, for anything else.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Generic, TypeVar
from urllib.parse import quote, unquote

from herdless.cluster.errors import MalformedZNode
from herdless.protocol import kafka_uuid
from herdless.protocol.kafka_uuid import kafka_uuid_str

# Znode names of users and client ids; layout.sanitize and layout.desanitize as before.
from herdless.protocol.sanitizer import desanitize as desanitize
from herdless.protocol.sanitizer import sanitize as sanitize
from herdless.security.listeners import Endpoint, SecurityProtocol

T = TypeVar("T")

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
TOPIC_CONFIGS_PATH = "/config/topics"
# Consumer groups' configs (KIP-848), which Kafka keeps only in KRaft's metadata log:
# beside the topics' configs, in their format, named by the group id percent-encoded
# (a group id may hold a '/').
GROUP_CONFIGS_PATH = "/config/groups"
# Users' configs, SCRAM credentials among them, named by the user sanitized as Kafka does.
USER_CONFIGS_PATH = "/config/users"
# Client ids' quotas (KIP-13); users' clients' are below their user's, .../clients/<id>.
CLIENT_CONFIGS_PATH = "/config/clients"
# Client-metrics subscriptions (KIP-714), each an entity config named by the subscription;
# Kafka's ConfigType.ClientMetrics.
CLIENT_METRICS_CONFIGS_PATH = "/config/client-metrics"
CLIENT_METRICS_ENTITY_TYPE = "client-metrics"
# A sequential znode written after each change to a user's (or any entity's) config, so
# every broker re-reads that config (Kafka's ConfigEntityChangeNotificationZNode).
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS_PATH = "/admin/delete_topics"
# A broker whose log directory failed says so here, in a persistent sequential znode
# the controller reads and deletes (Kafka's LogDirEventNotificationZNode).
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"

# What a Kafka broker creates at startup (KafkaZkClient.createTopLevelPaths), less the
# paths of features herdless does not keep in ZooKeeper.
PERSISTENT_PATHS = (
    BROKER_IDS_PATH,
    TOPICS_PATH,
    TOPIC_CONFIGS_PATH,
    CONFIG_CHANGES_PATH,
    USER_CONFIGS_PATH,
    CLIENT_CONFIGS_PATH,
    DELETE_TOPICS_PATH,
    "/brokers/seqid",
    "/isr_change_notification",
    LOG_DIR_EVENT_NOTIFICATION_PATH,
)

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"

# Kafka's first controller epoch: the first elected controller writes 1.
INITIAL_CONTROLLER_EPOCH = 0
NO_LEADER = -1
DEFAULT_LISTENER = "PLAINTEXT"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS_PATH}/{topic}"


def group_config_path(group: str) -> str:
    return f"{GROUP_CONFIGS_PATH}/{quote(group, safe='')}"


def group_of_config_node(name: str) -> str:
    return unquote(name)


def user_config_path(user: str) -> str:
    """ValueError for the two names ZooKeeper cannot hold, "." and ".."."""
    name = sanitize(user)
    if name in (".", ".."):
        raise ValueError(f"ZooKeeper cannot hold a user named {user!r}")
    return f"{USER_CONFIGS_PATH}/{name}"


def user_config_entity_path(user: str) -> str:
    """What a change notification names: the config's path below /config."""
    return f"users/{sanitize(user)}"


def entity_config_path(entity_path: str) -> str:
    """The znode of an entity's config by its path below /config (users/alice,
    users/alice/clients/app, clients/<default>): names already sanitized. ValueError for
    a name ZooKeeper cannot hold, "." or ".."."""
    for name in entity_path.split("/"):
        if name in (".", ".."):
            raise ValueError(f"ZooKeeper cannot hold an entity named {name!r}")
    return f"/config/{entity_path}"


def config_change_path(name: str) -> str:
    """The path of a config change notification by its znode name."""
    return f"{CONFIG_CHANGES_PATH}/{name}"


def config_change_number(name: str) -> int | None:
    """The sequence number of a change notification's znode name; None if not one."""
    digits = name.removeprefix(CONFIG_CHANGE_PREFIX)
    if digits == name or not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits)


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def log_dir_event_path(name: str) -> str:
    """The path of a log directory event by its znode name (prefix and sequence number)."""
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}"


@dataclass(frozen=True, slots=True)
class Versioned(Generic[T]):
    """A decoded znode value with the znode's data version, for conditional writes."""

    value: T
    version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # Every advertised listener; none given: one PLAINTEXT listener at host:port.
    endpoints: tuple[Endpoint, ...] = ()

    def __post_init__(self) -> None:
        if not self.endpoints:
            default = Endpoint(DEFAULT_LISTENER, SecurityProtocol.PLAINTEXT, self.host, self.port)
            object.__setattr__(self, "endpoints", (default,))

    def listeners(self) -> tuple[Endpoint, ...]:
        return self.endpoints


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    name: str
    topic_id: uuid.UUID
    # partition -> replicas, the preferred leader first; while a partition is reassigned,
    # every replica it has (the target's, then the original's that are leaving: KIP-455)
    replicas: dict[int, tuple[int, ...]]
    # The partitions being reassigned: the replicas joining and the replicas leaving.
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(self.replicas[0]) if self.replicas else 0


class LeaderRecoveryState(IntEnum):
    RECOVERED = 0
    # Elected uncleanly: the leader must finish recovering before followers may join the ISR.
    RECOVERING = 1


class LogDirEvent(IntEnum):
    # Kafka's LogDirFailureEvent: a log directory of the broker failed.
    FAILURE = 1
    # herdless's own: the broker's failed log directory writes again and its replicas are
    # back (a Kafka broker brings a failed directory back only by restarting). Kafka's
    # controller reads only the broker of an event, and asks that broker about its
    # replicas whatever the event says.
    ONLINE = 2


@dataclass(frozen=True, slots=True)
class LogDirNotification:
    """One log directory event as the controller reads it."""

    # The znode's name, log_dir_event_<sequence number>: the order they were written in.
    name: str
    broker_id: int
    event: LogDirEvent
    # The zxid that created the znode: an event from before the broker's current
    # registration (a broker epoch is its registration's zxid) is of an earlier life.
    zxid: int


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One config change notification: which entity's config to read again."""

    # The znode's name, config_change_<sequence number>: the order they were written in.
    name: str
    # Below /config, the entity type and the sanitized name: `users/alice`.
    entity_path: str
    # When ZooKeeper created it (its clock, ms): Kafka deletes them after 15 minutes.
    created_ms: int


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Kafka's LeaderIsrAndControllerEpoch: who leads, in which epoch, with which ISR."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


# -- encoding ---------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    # Kafka writes this version as a string, unlike every other znode's.
    return _json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    fields = _object(CLUSTER_ID_PATH, data)
    return _field(CLUSTER_ID_PATH, fields, "id", str)


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _json(
        {
            "version": 2,
            "brokerid": broker_id,
            "timestamp": str(timestamp_ms),
            "kraftControllerEpoch": -1,
        }
    )


def decode_controller(data: bytes | None) -> int:
    """The broker id of the controller."""
    return _field(CONTROLLER_PATH, _object(CONTROLLER_PATH, data), "brokerid", int)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except (UnicodeDecodeError, ValueError):
        raise MalformedZNode(CONTROLLER_EPOCH_PATH, f"not an epoch number: {data!r}") from None


def encode_broker(registration: BrokerRegistration, timestamp_ms: int) -> bytes:
    """Version 5 of Kafka's broker registration. As Kafka, host and port are the first
    PLAINTEXT listener's, or null and -1 when there is none."""
    listeners = registration.listeners()
    plaintext = [e for e in listeners if e.security_protocol is SecurityProtocol.PLAINTEXT]
    fields: dict[str, Any] = {
        "version": 5,
        "host": plaintext[0].host if plaintext else None,
        "port": plaintext[0].port if plaintext else -1,
        "endpoints": [f"{e.listener}://{_format_address(e.host, e.port)}" for e in listeners],
        "jmx_port": -1,
        "timestamp": str(timestamp_ms),
        "listener_security_protocol_map": {
            e.listener: e.security_protocol.value for e in listeners
        },
        "features": {},
    }
    if registration.rack is not None:
        fields["rack"] = registration.rack
    return _json({key: fields[key] for key in _BROKER_KEY_ORDER if key in fields})


def decode_broker(broker_id: int, data: bytes | None) -> BrokerRegistration:
    path = broker_path(broker_id)
    fields = _object(path, data)
    version = _field(path, fields, "version", int)
    if version < 1:
        raise MalformedZNode(path, f"unsupported registration version {version}")
    rack = fields.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise MalformedZNode(path, f"rack is not a string: {rack!r}")
    host, port = fields.get("host"), fields.get("port")
    # Kafka puts the first PLAINTEXT listener in host/port, or null and -1 when there is
    # none; then the first advertised endpoint is the address to use.
    if not isinstance(host, str) or not host or not _is_int(port) or port < 0:
        host, port = _first_endpoint(path, fields)
    return BrokerRegistration(broker_id, host, port, rack, _endpoints(fields))


def _endpoints(fields: Mapping[str, Any]) -> tuple[Endpoint, ...]:
    """The registration's listeners; those it gives no known protocol for are left out."""
    protocols = fields.get("listener_security_protocol_map")
    if not isinstance(protocols, dict):
        protocols = {}
    endpoints = []
    for entry in fields.get("endpoints") or ():
        if not isinstance(entry, str):
            continue
        name, sep, address = entry.partition("://")
        host, _, port = address.rpartition(":")
        protocol = protocols.get(name, name if not protocols else None)
        if not sep or not port.isdigit() or protocol not in SecurityProtocol.__members__:
            continue
        endpoints.append(Endpoint(name, SecurityProtocol(protocol), host.strip("[]"), int(port)))
    return tuple(endpoints)


def encode_topic(assignment: TopicAssignment) -> bytes:
    """Version 3 of Kafka's topic assignment, with the reassignments in progress."""
    fields: dict[str, Any] = {
        "version": 3,
        "partitions": _partition_map(assignment.replicas),
        "adding_replicas": _partition_map(assignment.adding),
        "removing_replicas": _partition_map(assignment.removing),
        "topic_id": kafka_uuid_str(assignment.topic_id),
    }
    return _json({key: fields[key] for key in _TOPIC_KEY_ORDER})


def _partition_map(replicas: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    # Kafka leaves out the partitions with no replicas adding (or removing).
    keys = [str(p) for p in sorted(replicas) if replicas[p]]
    return {p: list(replicas[int(p)]) for p in _scala_mutable_map_order(keys, _EMPTY_MAP_TABLE)}


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    """With the reassignments in progress (version 2 on; version 1 has none)."""
    path = topic_path(topic)
    fields = _object(path, data)
    raw_id = fields.get("topic_id")
    if not isinstance(raw_id, str):
        # Topics created before Kafka 2.8 have none; Kafka's controller adds one later.
        raise MalformedZNode(path, "no topic_id")
    topic_id = parse_kafka_uuid(path, raw_id)
    return TopicAssignment(
        topic,
        topic_id,
        _decode_partition_map(path, fields, "partitions"),
        _decode_partition_map(path, fields, "adding_replicas"),
        _decode_partition_map(path, fields, "removing_replicas"),
    )


def _decode_partition_map(
    path: str, fields: Mapping[str, Any], key: str
) -> dict[int, tuple[int, ...]]:
    partitions = fields.get(key) or {}
    if not isinstance(partitions, dict):
        raise MalformedZNode(path, f"{key} is not an object: {partitions!r}")
    replicas: dict[int, tuple[int, ...]] = {}
    for partition, value in partitions.items():
        if not (partition.isascii() and partition.isdigit()) or not _is_int_list(value):
            raise MalformedZNode(path, f"bad {key} for partition {partition!r}: {value!r}")
        if value:
            replicas[int(partition)] = tuple(value)
    return dict(sorted(replicas.items()))


def encode_partition_state(state: PartitionState) -> bytes:
    fields: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state != LeaderRecoveryState.RECOVERED:
        fields["leader_recovery_state"] = int(state.leader_recovery_state)
    return _json({key: fields[key] for key in _PARTITION_STATE_KEY_ORDER if key in fields})


def decode_partition_state(topic: str, partition: int, data: bytes | None) -> PartitionState:
    path = partition_state_path(topic, partition)
    fields = _object(path, data)
    isr = fields.get("isr")
    if not _is_int_list(isr):
        raise MalformedZNode(path, f"isr is not a list of broker ids: {isr!r}")
    recovery = fields.get("leader_recovery_state", 0)
    if recovery not in (0, 1) or isinstance(recovery, bool):
        raise MalformedZNode(path, f"unknown leader_recovery_state {recovery!r}")
    return PartitionState(
        leader=_field(path, fields, "leader", int),
        leader_epoch=_field(path, fields, "leader_epoch", int),
        isr=tuple(isr),
        controller_epoch=_field(path, fields, "controller_epoch", int),
        leader_recovery_state=LeaderRecoveryState(recovery),
    )


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    """Kafka's ProducerIdBlockZNode: the last block handed out, its end inclusive."""
    return _json(
        {"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)}
    )


def decode_producer_id_block_end(data: bytes | None) -> int:
    """The last id of the last block handed out; -1 before the first."""
    if not data:
        return -1
    fields = _object(PRODUCER_ID_BLOCK_PATH, data)
    try:
        return int(fields["block_end"])
    except (KeyError, TypeError, ValueError):
        raise MalformedZNode(PRODUCER_ID_BLOCK_PATH, "no integer block_end") from None


def encode_log_dir_event(broker_id: int, event: LogDirEvent) -> bytes:
    # A Scala immutable Map of three entries keeps insertion order.
    return _json({"version": 1, "broker": broker_id, "event": int(event)})


def decode_log_dir_event(name: str, data: bytes | None) -> tuple[int, LogDirEvent]:
    """(broker id, event) of a log directory event znode."""
    path = log_dir_event_path(name)
    fields = _object(path, data)
    broker_id = _field(path, fields, "broker", int)
    event = fields.get("event", LogDirEvent.FAILURE)
    if not _is_int(event) or event not in {e.value for e in LogDirEvent}:
        raise MalformedZNode(path, f"unknown log directory event {event!r}")
    return broker_id, LogDirEvent(event)


def encode_topic_config(configs: Mapping[str, str]) -> bytes:
    ordered = _java_properties_order(list(configs))
    return _json({"version": 1, "config": {key: configs[key] for key in ordered}})


def encode_user_config(configs: Mapping[str, str]) -> bytes:
    """A user's config: the format of every entity's config (Kafka's ConfigEntityZNode)."""
    return encode_topic_config(configs)


def decode_topic_config(topic: str, data: bytes | None) -> dict[str, str]:
    return _decode_config(topic_config_path(topic), data)


def decode_user_config(user: str, data: bytes | None) -> dict[str, str]:
    """A user's config (SCRAM credentials, quotas), as Kafka's ConfigEntityZNode holds it."""
    return _decode_config(user_config_path(user), data)


def decode_entity_config(entity_path: str, data: bytes | None) -> dict[str, str]:
    """Any entity's config (a user's, a client id's, a user's client id's)."""
    return _decode_config(entity_config_path(entity_path), data)


def encode_config_change(entity_path: str) -> bytes:
    """Version 2 of Kafka's config change notification (a Scala Map of two entries keeps
    insertion order)."""
    return _json({"version": 2, "entity_path": entity_path})


def decode_config_change(name: str, data: bytes | None) -> str:
    """The entity path a change notification names (`users/alice`); version 1, which
    Kafka still reads, names it in two fields."""
    path = config_change_path(name)
    fields = _object(path, data)
    version = fields.get("version")
    if version == 2:
        return _field(path, fields, "entity_path", str)
    if version == 1:
        entity_type = _field(path, fields, "entity_type", str)
        return f"{entity_type}/{_field(path, fields, 'entity_name', str)}"
    raise MalformedZNode(path, f"unsupported config change version {version!r}")


def _decode_config(path: str, data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    config = _object(path, data).get("config", {})
    if not isinstance(config, dict):
        raise MalformedZNode(path, f"config is not an object: {config!r}")
    # Named by key only: a user's values are credentials, kept out of logs.
    not_strings = sorted(k for k, v in config.items() if not isinstance(v, str))
    if not_strings:
        raise MalformedZNode(path, f"config values are not strings: {not_strings}")
    return dict(config)


def parse_kafka_uuid(path: str, text: str) -> uuid.UUID:
    try:
        return kafka_uuid.parse_kafka_uuid(text)
    except ValueError as exc:
        raise MalformedZNode(path, str(exc)) from None


# -- JSON helpers -----------------------------------------------------------------------


def _json(value: Mapping[str, Any]) -> bytes:
    # Jackson's output: no whitespace, UTF-8 rather than \u escapes.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _object(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise MalformedZNode(path, "no data")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedZNode(path, f"not JSON ({exc}): {data[:200]!r}") from None
    if not isinstance(value, dict):
        raise MalformedZNode(path, f"not a JSON object: {data[:200]!r}")
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int_list(value: object) -> bool:
    return isinstance(value, list) and all(_is_int(item) for item in value)


def _field(path: str, fields: Mapping[str, Any], key: str, kind: type[T]) -> T:
    value = fields.get(key)
    if kind is int and _is_int(value) or kind is str and isinstance(value, str):
        return value  # type: ignore[return-value]
    raise MalformedZNode(path, f"{key} is missing or not {kind.__name__}: {value!r}")


def _format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _first_endpoint(path: str, fields: Mapping[str, Any]) -> tuple[str, int]:
    endpoints = fields.get("endpoints")
    if isinstance(endpoints, list) and endpoints and isinstance(endpoints[0], str):
        _, sep, address = endpoints[0].partition("://")
        host, _, port = address.rpartition(":")
        if sep and host and port.isdigit():
            return host.strip("[]"), int(port)
    raise MalformedZNode(path, f"no usable host, port or endpoint: {dict(fields)!r}")


# -- the iteration orders of Kafka's maps -----------------------------------------------


def _java_string_hash(text: str) -> int:
    """Java's String.hashCode, over UTF-16 code units, as an unsigned 32-bit value."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def _signed(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def _scala_mutable_map_order(keys: Sequence[str], table_length: int) -> list[str]:
    """The iteration order of these keys put into a Scala 2.13 mutable.HashMap.

    Its buckets are kept sorted by (signed) improved hash and iterated in table order; the
    table doubles when an insertion would reach three quarters of it.
    """
    length, threshold = table_length, int(table_length * 0.75)
    for count in range(len(keys)):
        if count + 1 >= threshold:
            length, threshold = length * 2, int(length * 2 * 0.75)
    improved = [(h ^ (h >> 16), i) for i, h in enumerate(map(_java_string_hash, keys))]
    improved.sort(key=lambda entry: (entry[0] & (length - 1), _signed(entry[0]), entry[1]))
    return [keys[i] for _, i in improved]


def _java_properties_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of java.util.Properties (a ConcurrentHashMap inside) after
    setProperty of these keys in turn: bins of 16, doubled when the size reaches three
    quarters, each bin split on resize as ConcurrentHashMap.transfer splits it.

    Assumes no bin ever holds eight keys (Java would then resize or make a tree of it).
    """
    length = 16
    bins: list[list[tuple[int, str]]] = [[] for _ in range(length)]
    for size, key in enumerate(keys, start=1):
        h = _java_string_hash(key)
        spread = (h ^ (h >> 16)) & 0x7FFFFFFF
        bins[spread & (length - 1)].append((spread, key))
        if size >= length - (length >> 2):
            bins = _split_bins(bins, length)
            length *= 2
    return [key for bin_ in bins for _, key in bin_]


def _split_bins(bins: list[list[tuple[int, str]]], length: int) -> list[list[tuple[int, str]]]:
    split: list[list[tuple[int, str]]] = [[] for _ in range(2 * length)]
    for index, nodes in enumerate(bins):
        if not nodes:
            continue
        # The tail whose nodes all go the same way is moved as it is; the nodes before it
        # are pushed onto the front of their new bins one by one, which reverses them.
        last_run = 0
        for i in range(1, len(nodes)):
            if nodes[i][0] & length != nodes[last_run][0] & length:
                last_run = i
        low: list[tuple[int, str]] = []
        high: list[tuple[int, str]] = []
        (high if nodes[last_run][0] & length else low).extend(nodes[last_run:])
        for node in nodes[:last_run]:
            (high if node[0] & length else low).insert(0, node)
        split[index], split[index + length] = low, high
    return split


def _fixed_order(keys: Iterable[str], table_length: int) -> tuple[str, ...]:
    return tuple(_scala_mutable_map_order(list(keys), table_length))


# mutable.Map(...) of six entries starts with a table of 16 (BrokerIdZNode.encode); of four,
# a table of 8 (TopicZNode.encode); an empty one, 16.
_EMPTY_MAP_TABLE = 16
_BROKER_KEY_ORDER = _fixed_order(
    (
        "version",
        "host",
        "port",
        "endpoints",
        "jmx_port",
        "timestamp",
        "rack",
        "listener_security_protocol_map",
        "features",
    ),
    16,
)
_TOPIC_KEY_ORDER = _fixed_order(
    ("version", "partitions", "adding_replicas", "removing_replicas", "topic_id"), 8
)
# An immutable Scala Map of five or six entries is a hash trie; these keys' improved hashes
# differ in their lowest five bits, which fixes this order (the one Kafka's docs show).
_PARTITION_STATE_KEY_ORDER = (
    "controller_epoch",
    "leader",
    "version",
    "leader_recovery_state",
    "leader_epoch",
    "isr",
)

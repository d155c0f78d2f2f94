"""Kafka's ZooKeeper layout: exact bytes as a Kafka 3.x broker writes them, round trips,
and one named error for anything malformed."""

from __future__ import annotations

import json
import uuid

import pytest

from herdless.cluster import layout
from herdless.cluster.errors import MalformedZNode
from herdless.cluster.layout import (
    BrokerRegistration,
    LeaderRecoveryState,
    LogDirEvent,
    PartitionState,
    TopicAssignment,
)
from herdless.security.listeners import Endpoint, SecurityProtocol

TOPIC_ID = uuid.UUID(bytes=bytes(range(16)))
TOPIC_ID_TEXT = "AAECAwQFBgcICQoLDA0ODw"


def test_paths_are_kafkas() -> None:
    assert layout.broker_path(3) == "/brokers/ids/3"
    assert layout.topic_path("t") == "/brokers/topics/t"
    assert layout.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert layout.topic_config_path("t") == "/config/topics/t"
    assert layout.delete_topic_path("t") == "/admin/delete_topics/t"
    assert layout.CONTROLLER_PATH == "/controller"
    assert layout.CONTROLLER_EPOCH_PATH == "/controller_epoch"
    assert layout.CLUSTER_ID_PATH == "/cluster/id"


def test_log_dir_events_are_kafkas() -> None:
    # LogDirEventNotificationSequenceZNode: version, broker, event, in that order.
    assert layout.LOG_DIR_EVENT_NOTIFICATION_PATH == "/log_dir_event_notification"
    assert layout.LOG_DIR_EVENT_NOTIFICATION_PATH in layout.PERSISTENT_PATHS
    assert layout.log_dir_event_path("log_dir_event_0000000007") == (
        "/log_dir_event_notification/log_dir_event_0000000007"
    )
    failure = layout.encode_log_dir_event(3, LogDirEvent.FAILURE)
    assert failure == b'{"version":1,"broker":3,"event":1}'
    assert layout.decode_log_dir_event("e", failure) == (3, LogDirEvent.FAILURE)
    online = layout.encode_log_dir_event(3, LogDirEvent.ONLINE)
    assert layout.decode_log_dir_event("e", online) == (3, LogDirEvent.ONLINE)
    # Kafka's controller reads only the broker; an event left out is a failure.
    assert layout.decode_log_dir_event("e", b'{"broker":2}') == (2, LogDirEvent.FAILURE)
    for bad in (
        b'{"version":1,"event":1}',
        b'{"broker":2,"event":9}',
        b'{"broker":2,"event":true}',
    ):
        with pytest.raises(MalformedZNode, match="/log_dir_event_notification/e"):
            layout.decode_log_dir_event("e", bad)


def test_kafka_uuid_text_is_url_safe_base64_without_padding() -> None:
    assert layout.kafka_uuid_str(TOPIC_ID) == TOPIC_ID_TEXT
    assert layout.parse_kafka_uuid("/p", TOPIC_ID_TEXT) == TOPIC_ID
    with pytest.raises(MalformedZNode, match="/p"):
        layout.parse_kafka_uuid("/p", "not-a-uuid")


# -- partition state -----------------------------------------------------------------------


def test_partition_state_bytes_are_kafkas() -> None:
    # The key order of Kafka's docs ("controller_epoch","leader","version","leader_epoch",
    # "isr") and of any partition state znode a Kafka 3.x broker wrote.
    state = PartitionState(leader=2, leader_epoch=0, isr=(2, 3, 1), controller_epoch=1)
    data = b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}'
    assert layout.encode_partition_state(state) == data
    assert layout.decode_partition_state("t", 0, data) == state


def test_recovering_leader_is_written_only_when_recovering() -> None:
    state = PartitionState(
        leader=1,
        leader_epoch=5,
        isr=(1,),
        controller_epoch=3,
        leader_recovery_state=LeaderRecoveryState.RECOVERING,
    )
    data = layout.encode_partition_state(state)
    assert data == (
        b'{"controller_epoch":3,"leader":1,"version":1,"leader_recovery_state":1,'
        b'"leader_epoch":5,"isr":[1]}'
    )
    assert layout.decode_partition_state("t", 0, data) == state


def test_partition_state_without_recovery_field_is_recovered_and_any_key_order_reads() -> None:
    data = b'{"isr":[1,2], "version":1, "leader":-1, "leader_epoch":7, "controller_epoch":2}'
    state = layout.decode_partition_state("t", 4, data)
    assert state == PartitionState(-1, 7, (1, 2), 2, LeaderRecoveryState.RECOVERED)
    assert not state.has_leader


@pytest.mark.parametrize(
    "data",
    [
        None,
        b"",
        b"not json",
        b"[1,2]",
        b'{"leader":1,"leader_epoch":0,"controller_epoch":1}',
        b'{"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":["1"]}',
        b'{"leader":"1","leader_epoch":0,"controller_epoch":1,"isr":[1]}',
        b'{"leader":true,"leader_epoch":0,"controller_epoch":1,"isr":[1]}',
        b'{"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1],"leader_recovery_state":5}',
    ],
)
def test_malformed_partition_state_names_its_path(data: bytes | None) -> None:
    with pytest.raises(MalformedZNode, match=r"/brokers/topics/t/partitions/4/state") as info:
        layout.decode_partition_state("t", 4, data)
    assert info.value.path == "/brokers/topics/t/partitions/4/state"


# -- topic assignment ----------------------------------------------------------------------


def test_topic_assignment_bytes_are_kafkas() -> None:
    assignment = TopicAssignment("demo", TOPIC_ID, {0: (2, 3, 1), 1: (3, 1, 2), 2: (1, 2, 3)})
    data = (
        b'{"partitions":{"0":[2,3,1],"1":[3,1,2],"2":[1,2,3]},"topic_id":"'
        + TOPIC_ID_TEXT.encode()
        + b'","adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    assert layout.encode_topic(assignment) == data
    assert layout.decode_topic("demo", data) == assignment
    assert assignment.replication_factor == 3


def test_many_partitions_come_in_scala_hash_map_order() -> None:
    # Kafka 3.x writes a 12-partition topic with "11" first: the partitions map is a Scala
    # mutable.HashMap that grew to 32 buckets, where "11" hashes to bucket 0.
    assignment = TopicAssignment("t", TOPIC_ID, {p: (p % 3,) for p in range(12)})
    partitions = json.loads(layout.encode_topic(assignment))["partitions"]
    assert list(partitions) == ["11", *map(str, range(11))]
    assert layout.decode_topic("t", layout.encode_topic(assignment)) == assignment


def test_topic_from_kafka_with_reassignment_fields_reads_them() -> None:
    data = (
        b'{"version":3,"topic_id":"' + TOPIC_ID_TEXT.encode() + b'",'
        b'"partitions":{"1":[2,1],"0":[1,3,2]},'
        b'"adding_replicas":{"0":[3]},"removing_replicas":{"0":[2]}}'
    )
    assert layout.decode_topic("t", data) == TopicAssignment(
        "t", TOPIC_ID, {0: (1, 3, 2), 1: (2, 1)}, adding={0: (3,)}, removing={0: (2,)}
    )


def test_reassignment_in_progress_is_written_as_kafka_writes_it() -> None:
    assignment = TopicAssignment(
        "t", TOPIC_ID, {0: (4, 2, 1), 1: (2, 1)}, adding={0: (4,)}, removing={0: (1,)}
    )
    fields = json.loads(layout.encode_topic(assignment))
    assert fields["adding_replicas"] == {"0": [4]}
    assert fields["removing_replicas"] == {"0": [1]}
    assert layout.decode_topic("t", layout.encode_topic(assignment)) == assignment


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"version":2,"partitions":{"0":[1]}}', "no topic_id"),
        (b'{"version":3,"topic_id":"xyz","partitions":{"0":[1]}}', "not a Kafka uuid"),
        (
            b'{"version":3,"topic_id":"' + TOPIC_ID_TEXT.encode() + b'","partitions":[1]}',
            "not an object",
        ),
        (
            b'{"version":3,"topic_id":"' + TOPIC_ID_TEXT.encode() + b'","partitions":{"a":[1]}}',
            "'a'",
        ),
    ],
)
def test_malformed_topic_names_its_path(data: bytes, reason: str) -> None:
    with pytest.raises(MalformedZNode, match="/brokers/topics/t") as info:
        layout.decode_topic("t", data)
    assert reason in str(info.value)


# -- broker registration -------------------------------------------------------------------


def test_broker_registration_bytes_are_kafkas() -> None:
    registration = BrokerRegistration(1, "kafka-1", 9092, "rack-a")
    data = layout.encode_broker(registration, timestamp_ms=1700000000000)
    assert data == (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://kafka-1:9092"],"rack":"rack-a","jmx_port":-1,'
        b'"port":9092,"host":"kafka-1","version":5,"timestamp":"1700000000000"}'
    )
    decoded = layout.decode_broker(1, data)
    assert (decoded.host, decoded.port, decoded.rack) == ("kafka-1", 9092, "rack-a")
    assert decoded.listeners() == registration.listeners()


def test_a_registration_names_every_listener_and_its_protocol_as_kafka_does() -> None:
    """Kafka's host and port are the first PLAINTEXT listener's, or null and -1."""
    endpoints = (
        Endpoint("INTERNAL", SecurityProtocol.SASL_SSL, "10.0.0.1", 9094),
        Endpoint("EXTERNAL", SecurityProtocol.SSL, "kafka.example.com", 9093),
    )
    registration = BrokerRegistration(3, "10.0.0.1", 9094, None, endpoints)
    data = layout.encode_broker(registration, timestamp_ms=1)
    fields = json.loads(data)
    assert fields["endpoints"] == [
        "INTERNAL://10.0.0.1:9094",
        "EXTERNAL://kafka.example.com:9093",
    ]
    assert fields["listener_security_protocol_map"] == {
        "INTERNAL": "SASL_SSL",
        "EXTERNAL": "SSL",
    }
    assert (fields["host"], fields["port"]) == (None, -1)
    decoded = layout.decode_broker(3, data)
    assert decoded.endpoints == endpoints
    # With no PLAINTEXT listener the first endpoint is the address.
    assert (decoded.host, decoded.port) == ("10.0.0.1", 9094)


def test_broker_without_rack_writes_no_rack() -> None:
    data = layout.encode_broker(BrokerRegistration(2, "::1", 9093), timestamp_ms=1)
    fields = json.loads(data)
    assert "rack" not in fields
    assert fields["endpoints"] == ["PLAINTEXT://[::1]:9093"]
    decoded = layout.decode_broker(2, data)
    assert (decoded.host, decoded.port, decoded.rack) == ("::1", 9093, None)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        # version 1: host and port only
        (
            {"version": 1, "host": "10.0.0.1", "port": 9091, "jmx_port": -1, "timestamp": "1"},
            BrokerRegistration(7, "10.0.0.1", 9091),
        ),
        # version 4, a null rack
        (
            {
                "version": 4,
                "host": "localhost",
                "port": 9092,
                "jmx_port": 9999,
                "timestamp": "2",
                "endpoints": ["CLIENT://host1:9092", "REPLICATION://host1:9093"],
                "listener_security_protocol_map": {"CLIENT": "SSL", "REPLICATION": "PLAINTEXT"},
                "rack": None,
            },
            BrokerRegistration(
                7,
                "localhost",
                9092,
                endpoints=(
                    Endpoint("CLIENT", SecurityProtocol.SSL, "host1", 9092),
                    Endpoint("REPLICATION", SecurityProtocol.PLAINTEXT, "host1", 9093),
                ),
            ),
        ),
        # no PLAINTEXT listener: Kafka writes a null host and port -1
        (
            {
                "version": 5,
                "host": None,
                "port": -1,
                "jmx_port": -1,
                "timestamp": "3",
                "endpoints": ["SSL://[fe80::1]:9094"],
                "rack": "r2",
                "features": {"metadata.version": {"min_version": 1, "max_version": 20}},
            },
            BrokerRegistration(
                7,
                "fe80::1",
                9094,
                "r2",
                (Endpoint("SSL", SecurityProtocol.SSL, "fe80::1", 9094),),
            ),
        ),
    ],
)
def test_broker_registrations_of_every_kafka_version_read(
    document: dict[str, object], expected: BrokerRegistration
) -> None:
    assert layout.decode_broker(7, json.dumps(document, indent=2).encode()) == expected


@pytest.mark.parametrize(
    "data",
    [b"{}", b'{"version":0,"host":"h","port":1}', b'{"version":5,"host":null,"port":-1}', b"\xff"],
)
def test_malformed_broker_names_its_path(data: bytes) -> None:
    with pytest.raises(MalformedZNode, match="/brokers/ids/7"):
        layout.decode_broker(7, data)


# -- controller, epoch, cluster id, configs ------------------------------------------------


def test_controller_bytes_are_kafkas() -> None:
    data = layout.encode_controller(1, timestamp_ms=1700000000000)
    assert (
        data == b'{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}'
    )
    assert layout.decode_controller(data) == 1
    # What Kafka 2.x wrote.
    assert layout.decode_controller(b'{"version":1,"brokerid":1001,"timestamp":"1"}') == 1001
    with pytest.raises(MalformedZNode, match="/controller"):
        layout.decode_controller(b'{"version":2}')


def test_controller_epoch_is_a_plain_number() -> None:
    assert layout.encode_controller_epoch(12) == b"12"
    assert layout.decode_controller_epoch(b"12") == 12
    with pytest.raises(MalformedZNode, match="/controller_epoch"):
        layout.decode_controller_epoch(b"twelve")


def test_cluster_id_version_is_a_string_as_in_kafka() -> None:
    data = layout.encode_cluster_id("IOejp_IKSbWbySJc0sRrKw")
    assert data == b'{"version":"1","id":"IOejp_IKSbWbySJc0sRrKw"}'
    assert layout.decode_cluster_id(data) == "IOejp_IKSbWbySJc0sRrKw"
    with pytest.raises(MalformedZNode, match="/cluster/id"):
        layout.decode_cluster_id(b'{"version":"1"}')


def test_topic_config_bytes_are_kafkas() -> None:
    # Written by Java 17's java.util.Properties through Jackson, as Kafka writes it.
    configs = {"retention.ms": "86400000", "cleanup.policy": "compact", "min.insync.replicas": "2"}
    data = layout.encode_topic_config(configs)
    assert data == (
        b'{"version":1,"config":{"cleanup.policy":"compact","min.insync.replicas":"2",'
        b'"retention.ms":"86400000"}}'
    )
    assert layout.decode_topic_config("t", data) == configs


def test_many_topic_configs_come_in_java_properties_order() -> None:
    # Thirteen keys make Properties' table grow from 16 to 32 bins; the order is the one
    # Java 17 and Jackson produced for these keys set in this order.
    keys = [
        "segment.bytes", "retention.ms", "cleanup.policy", "min.insync.replicas",
        "max.message.bytes", "compression.type", "retention.bytes", "segment.ms",
        "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
        "message.timestamp.type", "flush.messages",
    ]  # fmt: skip
    written = json.loads(layout.encode_topic_config(dict.fromkeys(keys, "1")))["config"]
    assert list(written) == [
        "compression.type", "max.compaction.lag.ms", "max.message.bytes",
        "min.compaction.lag.ms", "message.timestamp.type", "min.insync.replicas",
        "retention.bytes", "delete.retention.ms", "cleanup.policy", "segment.bytes",
        "retention.ms", "segment.ms", "flush.messages",
    ]  # fmt: skip


def test_empty_or_malformed_topic_config() -> None:
    assert layout.decode_topic_config("t", None) == {}
    assert layout.decode_topic_config("t", b'{"version":1,"config":{}}') == {}
    with pytest.raises(MalformedZNode, match="/config/topics/t"):
        layout.decode_topic_config("t", b'{"version":1,"config":{"a":1}}')

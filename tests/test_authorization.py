"""Kafka's authorization matrix on one broker with the ACL authorizer on: for each API
served, a principal with and without each ACL Kafka's KafkaApis asks for gets Kafka's
answer; DENY beats ALLOW; prefixed patterns grant; super users need no ACL; Metadata
leaves out what may not be described; auto-creation needs CREATE; decisions reach the
authorizer log and the metrics; and confluent-kafka produces and consumes in a group with
exactly the ACLs `herdless acls add --producer` and `--consumer` grant.

Principals log in with SCRAM over SASL_PLAINTEXT: admin is the super user; alice is
granted, test by test, what each check needs (on resources of that test's own); bob is
never granted anything. The PLAINTEXT listener beside it serves User:ANONYMOUS, who has
no rights at all. Requests are raw, so that each answer's error codes are seen as sent.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from herdless.broker.peers.connection import PeerConnection, PeerSecurity
from herdless.cli.acls import AclOptions, bindings_to_add
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from herdless.protocol.kafka_uuid import kafka_uuid_str
from herdless.security.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from herdless.security.sasl_client import ScramClient
from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.support.requests import v2_batch

MECHANISM = "SCRAM-SHA-256"
PASSWORDS = {user: f"{user}-Secret-{uuid.uuid4().hex[:8]}" for user in ("admin", "alice", "bob")}
# carol consumes and dave produces with the CLI's ACLs; erin is refused once, to be logged.
PASSWORDS |= {user: f"{user}-Secret-{uuid.uuid4().hex[:8]}" for user in ("carol", "dave", "erin")}

NONE = ErrorCode.NONE
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

# DescribeConfigs' resource types.
TOPIC_CONFIGS, BROKER_CONFIGS, CLIENT_METRICS_CONFIGS, GROUP_CONFIGS = 2, 4, 16, 32


@dataclass
class Secured:
    broker: BrokerProcess
    sasl_port: int
    metrics_port: int


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    data_dir = tmp_path_factory.mktemp("authorization") / "data"
    for user, password in PASSWORDS.items():
        subprocess.run(
            [sys.executable, "-m", "herdless", "users", "add", user, "--password-stdin"]
            + ["--data-dir", str(data_dir)],
            input=password,
            text=True,
            check=True,
            capture_output=True,
        )
    sasl_port, metrics_port = free_port(), free_port()
    settings = {
        "authorizer.class.name": "acls",
        "super.users": "User:admin",
        "sasl.enabled.mechanisms": MECHANISM,
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "true",
        "metrics.port": str(metrics_port),
    }
    args = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    listeners = f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    with module_broker(data_dir, *args, listeners=listeners) as broker:
        yield Secured(broker, sasl_port, metrics_port)


class Client:
    """One principal's raw connection: request(api key, version, **fields as dicts)."""

    def __init__(self, runner: asyncio.Runner, host: str, port: int, user: str | None) -> None:
        sasl = None
        if user is not None:
            password = PASSWORDS[user]
            sasl = lambda _host: ScramClient(MECHANISM, user, password)  # noqa: E731
        self._runner = runner
        self._connection = PeerConnection(host, port, f"authz-{user}", 30, PeerSecurity(sasl=sasl))

    def __call__(self, api_key: int, version: int, **fields: Any) -> Any:
        return self._runner.run(self._connection.request(api_key, version, **fields))

    def close(self) -> None:
        self._connection.close()


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:
        yield loop_runner


def _client(secured: Secured, runner: asyncio.Runner, user: str | None) -> Iterator[Client]:
    port = secured.sasl_port if user is not None else secured.broker.port
    client = Client(runner, "127.0.0.1", port, user)
    yield client
    client.close()


@pytest.fixture(scope="module")
def admin(secured: Secured, runner: asyncio.Runner) -> Iterator[Client]:
    yield from _client(secured, runner, "admin")


@pytest.fixture(scope="module")
def alice(secured: Secured, runner: asyncio.Runner) -> Iterator[Client]:
    yield from _client(secured, runner, "alice")


@pytest.fixture(scope="module")
def bob(secured: Secured, runner: asyncio.Runner) -> Iterator[Client]:
    yield from _client(secured, runner, "bob")


@pytest.fixture(scope="module")
def anonymous(secured: Secured, runner: asyncio.Runner) -> Iterator[Client]:
    yield from _client(secured, runner, None)


# -- ACLs and topics, as the super user makes them --------------------------------------


def grant(
    admin: Client,
    resource_type: ResourceType,
    name: str,
    *operations: AclOperation,
    principal: str = "User:alice",
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
) -> None:
    creations = [
        {
            "resource_type": int(resource_type),
            "resource_name": name,
            "resource_pattern_type": int(pattern),
            "principal": principal,
            "host": "*",
            "operation": int(operation),
            "permission_type": int(permission),
        }
        for operation in operations
    ]
    answer = admin(ApiKey.CREATE_ACLS, 2, creations=creations)
    assert [r.error_code for r in answer.results] == [NONE] * len(creations)


def deny(admin: Client, resource_type: ResourceType, name: str, *operations: AclOperation) -> None:
    grant(admin, resource_type, name, *operations, permission=AclPermissionType.DENY)


def create_bindings(admin: Client, bindings: list[AclBinding]) -> None:
    for b in bindings:
        grant(
            admin,
            b.pattern.resource_type,
            b.pattern.name,
            b.entry.operation,
            principal=b.entry.principal,
            permission=b.entry.permission_type,
            pattern=b.pattern.pattern_type,
        )


def create_topic(admin: Client, name: str, partitions: int = 1) -> None:
    answer = admin(
        ApiKey.CREATE_TOPICS,
        5,
        topics=[{"name": name, "num_partitions": partitions, "replication_factor": 1}],
        timeout_ms=10_000,
    )
    assert answer.topics[0].error_code == NONE, answer


def produce(client: Client, topic: str) -> int:
    records = v2_batch([(None, b"value", int(time.time() * 1000))])
    answer = client(
        ApiKey.PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    )
    return answer.responses[0].partition_responses[0].error_code


def metadata(client: Client, topics: list[str] | None, version: int = 12, **fields: Any) -> Any:
    wanted = None if topics is None else [{"name": t} for t in topics]
    return client(
        ApiKey.METADATA, version, topics=wanted, allow_auto_topic_creation=False, **fields
    )


def topic_errors(answer: Any) -> dict[str, int]:
    return {t.name: t.error_code for t in answer.topics}


# -- data ----------------------------------------------------------------------------


def test_produce_needs_write_on_the_topic(admin: Client, alice: Client) -> None:
    create_topic(admin, "pr-orders")
    assert produce(alice, "pr-orders") == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "pr-orders", AclOperation.READ)  # not WRITE
    assert produce(alice, "pr-orders") == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "pr-orders", AclOperation.WRITE)
    assert produce(alice, "pr-orders") == NONE
    # A topic that does not exist is refused alike without WRITE: its existence is not told.
    assert produce(alice, "pr-nowhere") == TOPIC_DENIED


def test_deny_beats_allow_wherever_it_comes_from(admin: Client, alice: Client) -> None:
    create_topic(admin, "dn-orders")
    grant(admin, ResourceType.TOPIC, "dn-orders", AclOperation.ALL)
    assert produce(alice, "dn-orders") == NONE
    # A DENY on a prefix refuses what an ALLOW of everything on the literal name grants.
    grant(
        admin,
        ResourceType.TOPIC,
        "dn-",
        AclOperation.WRITE,
        permission=AclPermissionType.DENY,
        pattern=PatternType.PREFIXED,
    )
    assert produce(alice, "dn-orders") == TOPIC_DENIED
    # Denying WRITE does not deny what READ implies: alice may still describe the topic.
    assert topic_errors(metadata(alice, ["dn-orders"])) == {"dn-orders": NONE}


def test_prefixed_acls_grant_every_topic_under_the_prefix(admin: Client, alice: Client) -> None:
    for name in ("px-team-a", "px-team-b", "px-other"):
        create_topic(admin, name)
    grant(admin, ResourceType.TOPIC, "px-team-", AclOperation.WRITE, pattern=PatternType.PREFIXED)
    assert produce(alice, "px-team-a") == NONE
    assert produce(alice, "px-team-b") == NONE
    assert produce(alice, "px-other") == TOPIC_DENIED


def test_super_users_need_no_acl(admin: Client) -> None:
    create_topic(admin, "su-orders")
    assert produce(admin, "su-orders") == NONE
    assert topic_errors(metadata(admin, ["su-orders"])) == {"su-orders": NONE}


def test_anonymous_gets_nothing(admin: Client, anonymous: Client) -> None:
    create_topic(admin, "an-orders")
    assert produce(anonymous, "an-orders") == TOPIC_DENIED
    assert "an-orders" not in topic_errors(metadata(anonymous, None))
    answer = anonymous(ApiKey.DESCRIBE_ACLS, 2, **_any_acl())
    assert answer.error_code == CLUSTER_DENIED


def fetch(client: Client, topic: str, replica_id: int = -1) -> int:
    answer = client(
        ApiKey.FETCH,
        11,
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return answer.responses[0].partitions[0].error_code


def test_fetch_needs_read_and_a_follower_cluster_action(admin: Client, alice: Client) -> None:
    create_topic(admin, "fe-orders")
    assert produce(admin, "fe-orders") == NONE
    assert fetch(alice, "fe-orders") == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "fe-orders", AclOperation.DESCRIBE)
    assert fetch(alice, "fe-orders") == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "fe-orders", AclOperation.READ)
    assert fetch(alice, "fe-orders") == NONE
    # A follower's fetch is a broker's: CLUSTER_ACTION, which READ does not give.
    assert fetch(alice, "fe-orders", replica_id=7) == TOPIC_DENIED
    assert fetch(admin, "fe-orders", replica_id=7) != TOPIC_DENIED


def share_fetch(client: Client, group: str, topic_id: uuid.UUID) -> Any:
    return client(
        ApiKey.SHARE_FETCH,
        1,
        group_id=group,
        member_id=str(uuid.uuid4()),
        share_session_epoch=0,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=10,
        batch_size=10,
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
            }
        ],
        forgotten_topics_data=[],
    )


def test_share_fetch_needs_read_on_the_group_and_the_topic(admin: Client, alice: Client) -> None:
    create_topic(admin, "sf-orders")
    topic_id = metadata(admin, ["sf-orders"]).topics[0].topic_id
    assert share_fetch(alice, "sf-group", topic_id).error_code == GROUP_DENIED
    grant(admin, ResourceType.GROUP, "sf-group", AclOperation.READ)
    answer = share_fetch(alice, "sf-group", topic_id)
    assert answer.error_code == NONE
    assert answer.responses[0].partitions[0].error_code == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "sf-orders", AclOperation.READ)
    answer = share_fetch(alice, "sf-group", topic_id)
    assert answer.responses[0].partitions[0].error_code == NONE


def list_offsets(client: Client, topic: str) -> int:
    answer = client(
        ApiKey.LIST_OFFSETS,
        5,
        replica_id=-1,
        isolation_level=0,
        topics=[{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    )
    return answer.topics[0].partitions[0].error_code


def leader_epoch(client: Client, topic: str) -> int:
    answer = client(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        4,
        replica_id=-1,
        topics=[{"topic": topic, "partitions": [{"partition": 0, "leader_epoch": 0}]}],
    )
    return answer.topics[0].partitions[0].error_code


def test_list_offsets_and_leader_epochs_need_describe(admin: Client, alice: Client) -> None:
    create_topic(admin, "lo-orders")
    assert list_offsets(alice, "lo-orders") == TOPIC_DENIED
    assert leader_epoch(alice, "lo-orders") == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "lo-orders", AclOperation.DESCRIBE)
    assert list_offsets(alice, "lo-orders") == NONE
    assert leader_epoch(alice, "lo-orders") == NONE


def test_leader_epochs_for_a_broker_with_cluster_action(admin: Client, alice: Client) -> None:
    create_topic(admin, "le-orders")
    assert leader_epoch(alice, "le-orders") == TOPIC_DENIED
    grant(admin, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION)
    try:
        assert leader_epoch(alice, "le-orders") == NONE
    finally:
        revoke(admin, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION)


def share_state_answers(client: Client) -> list[int]:
    """What a caller gets from FindCoordinator's SHARE key type and a write of share
    state: the broker-to-broker side of share groups."""
    topic_id = uuid.uuid4()
    found = client(
        ApiKey.FIND_COORDINATOR,
        6,
        key_type=2,
        coordinator_keys=[f"sg:{kafka_uuid_str(topic_id)}:0"],
    ).coordinators[0]
    written = client(
        ApiKey.WRITE_SHARE_GROUP_STATE,
        0,
        group_id="sg",
        topics=[
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": 0,
                        "state_epoch": 0,
                        "leader_epoch": 0,
                        "start_offset": 0,
                        "state_batches": [],
                    }
                ],
            }
        ],
    )
    return [found.error_code, written.results[0].partitions[0].error_code]


def test_share_state_apis_are_for_brokers_with_cluster_action(admin: Client, alice: Client) -> None:
    assert share_state_answers(alice) == [CLUSTER_DENIED, CLUSTER_DENIED]
    grant(admin, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION)
    try:
        deadline = time.monotonic() + 30
        # The state topic is made by the first FindCoordinator: it may still be loading.
        while (answers := share_state_answers(alice)) != [NONE, NONE]:
            assert time.monotonic() < deadline, answers
            time.sleep(0.1)
    finally:
        revoke(admin, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION)


def describe_producers(client: Client, topic: str) -> int:
    answer = client(
        ApiKey.DESCRIBE_PRODUCERS, 0, topics=[{"name": topic, "partition_indexes": [0]}]
    )
    return answer.topics[0].partitions[0].error_code


def test_describe_producers_needs_read(admin: Client, alice: Client) -> None:
    create_topic(admin, "dp-orders")
    grant(admin, ResourceType.TOPIC, "dp-orders", AclOperation.DESCRIBE)
    assert describe_producers(alice, "dp-orders") == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "dp-orders", AclOperation.READ)
    assert describe_producers(alice, "dp-orders") == NONE


def revoke(admin: Client, resource_type: ResourceType, name: str, operation: AclOperation) -> None:
    answer = admin(
        ApiKey.DELETE_ACLS,
        2,
        filters=[
            {
                "resource_type_filter": int(resource_type),
                "resource_name_filter": name,
                "pattern_type_filter": int(PatternType.LITERAL),
                "principal_filter": "User:alice",
                "host_filter": None,
                "operation": int(operation),
                "permission_type": int(AclPermissionType.ANY),
            }
        ],
    )
    assert answer.filter_results[0].error_code == NONE


# -- Metadata --------------------------------------------------------------------------


def test_metadata_hides_what_may_not_be_described(admin: Client, alice: Client) -> None:
    for name in ("md-seen", "md-hidden"):
        create_topic(admin, name)
    grant(admin, ResourceType.TOPIC, "md-seen", AclOperation.READ)  # implies DESCRIBE
    everything = topic_errors(metadata(alice, None))
    assert everything.get("md-seen") == NONE
    assert "md-hidden" not in everything
    # Named: refused, whether the topic exists or not; no id is given away.
    named = metadata(alice, ["md-seen", "md-hidden", "md-nowhere"])
    assert topic_errors(named) == {
        "md-seen": NONE,
        "md-hidden": TOPIC_DENIED,
        "md-nowhere": TOPIC_DENIED,
    }
    hidden = next(t for t in named.topics if t.name == "md-hidden")
    # (kafka-python reads the zero id as None)
    assert hidden.topic_id in (None, uuid.UUID(int=0)) and hidden.partitions == []
    # The super user sees every topic.
    assert {"md-seen", "md-hidden"} <= topic_errors(metadata(admin, None)).keys()


def describe_topic_partitions(
    client: Client, topics: list[str], limit: int = 2000, cursor: dict[str, Any] | None = None
) -> Any:
    return client(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        topics=[{"name": t} for t in topics],
        response_partition_limit=limit,
        cursor=cursor,
    )


def test_describe_topic_partitions_hides_what_may_not_be_described(
    admin: Client, alice: Client
) -> None:
    create_topic(admin, "dtp-seen", partitions=3)
    create_topic(admin, "dtp-hidden")
    grant(admin, ResourceType.TOPIC, "dtp-seen", AclOperation.READ)  # implies DESCRIBE
    everything = describe_topic_partitions(alice, [])
    assert "dtp-seen" in topic_errors(everything)
    assert "dtp-hidden" not in topic_errors(everything)
    # Named: refused after the topics described, whether they exist or not, with no id.
    named = describe_topic_partitions(alice, ["dtp-nowhere", "dtp-seen", "dtp-hidden"])
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("dtp-seen", NONE),
        ("dtp-hidden", TOPIC_DENIED),
        ("dtp-nowhere", TOPIC_DENIED),
    ]
    seen, hidden = named.topics[0], named.topics[1]
    assert len(seen.partitions) == 3
    assert hidden.topic_id in (None, uuid.UUID(int=0)) and hidden.partitions == []
    # What alice may do on each topic described, always answered: READ implies DESCRIBE.
    assert seen.topic_authorized_operations == sum(
        1 << int(o) for o in (AclOperation.READ, AclOperation.DESCRIBE)
    )
    # Kafka's "not asked" value where it refuses.
    assert hidden.topic_authorized_operations == -(2**31)
    # The super user sees both, and may do everything on them.
    every = sum(1 << op for op in bits(SUPPORTED_OPERATIONS[ResourceType.TOPIC]))
    both = describe_topic_partitions(admin, ["dtp-seen", "dtp-hidden"])
    assert [(t.name, t.error_code, t.topic_authorized_operations) for t in both.topics] == [
        ("dtp-hidden", NONE, every),
        ("dtp-seen", NONE, every),
    ]


def test_describe_topic_partitions_pages_past_what_may_not_be_described(
    admin: Client, alice: Client
) -> None:
    """A page holds only what may be described: a refused topic takes no room in it."""
    create_topic(admin, "dtpp-a", partitions=2)
    create_topic(admin, "dtpp-b", partitions=2)
    create_topic(admin, "dtpp-c", partitions=2)
    for name in ("dtpp-a", "dtpp-c"):
        grant(admin, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    first = describe_topic_partitions(alice, ["dtpp-a", "dtpp-b", "dtpp-c"], limit=3)
    assert [(t.name, len(t.partitions)) for t in first.topics] == [
        ("dtpp-a", 2),
        ("dtpp-c", 1),
        ("dtpp-b", 0),
    ]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("dtpp-c", 1)
    rest = describe_topic_partitions(
        alice,
        ["dtpp-a", "dtpp-b", "dtpp-c"],
        limit=3,
        cursor={"topic_name": "dtpp-c", "partition_index": 1},
    )
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [
        ("dtpp-c", [1])
    ]
    assert rest.next_cursor is None


def test_auto_creation_needs_create(admin: Client, alice: Client) -> None:
    grant(admin, ResourceType.TOPIC, "ac-", AclOperation.DESCRIBE, pattern=PatternType.PREFIXED)

    def asked(topic: str) -> int:
        answer = alice(
            ApiKey.METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=True
        )
        return answer.topics[0].error_code

    assert asked("ac-refused") == TOPIC_DENIED
    assert "ac-refused" not in topic_errors(metadata(admin, None))
    grant(admin, ResourceType.TOPIC, "ac-created", AclOperation.CREATE)
    assert asked("ac-created") in (NONE, ErrorCode.LEADER_NOT_AVAILABLE)
    assert topic_errors(metadata(admin, ["ac-created"])) == {"ac-created": NONE}


def bits(operations: set[AclOperation] | frozenset[AclOperation]) -> set[int]:
    return {int(o) for o in operations}


def test_metadata_answers_authorized_operations(admin: Client, alice: Client) -> None:
    create_topic(admin, "ops-orders")
    grant(admin, ResourceType.TOPIC, "ops-orders", AclOperation.READ, AclOperation.ALTER_CONFIGS)
    answer = metadata(
        alice,
        ["ops-orders"],
        version=10,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    # READ implies DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    assert answer.topics[0].authorized_operations == bits(
        {
            AclOperation.READ,
            AclOperation.DESCRIBE,
            AclOperation.ALTER_CONFIGS,
            AclOperation.DESCRIBE_CONFIGS,
        }
    )
    # No DESCRIBE on the cluster: no cluster operations at all.
    assert answer.authorized_operations == set()
    everything = metadata(
        admin,
        ["ops-orders"],
        version=10,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    assert everything.authorized_operations == bits(SUPPORTED_OPERATIONS[ResourceType.CLUSTER])
    assert everything.topics[0].authorized_operations == bits(
        SUPPORTED_OPERATIONS[ResourceType.TOPIC]
    )
    cluster = alice(ApiKey.DESCRIBE_CLUSTER, 0, include_cluster_authorized_operations=True)
    assert cluster.error_code == NONE and cluster.authorized_operations == set()


# -- groups ----------------------------------------------------------------------------


def find_coordinator(client: Client, key: str, key_type: int = 0) -> int:
    return client(ApiKey.FIND_COORDINATOR, 3, key=key, key_type=key_type).error_code


def test_find_coordinator_needs_describe_on_the_group(admin: Client, alice: Client) -> None:
    assert find_coordinator(alice, "fc-group") == GROUP_DENIED
    grant(admin, ResourceType.GROUP, "fc-group", AclOperation.READ)  # implies DESCRIBE
    assert find_coordinator(alice, "fc-group") == NONE
    assert find_coordinator(alice, "fc-txn", key_type=1) == TXN_DENIED
    grant(admin, ResourceType.TRANSACTIONAL_ID, "fc-txn", AclOperation.DESCRIBE)
    # Allowed: this broker coordinates the transactional id.
    assert find_coordinator(alice, "fc-txn", key_type=1) == NONE
    batched = alice(
        ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["fc-group", "fc-other"]
    )
    assert {c.key: c.error_code for c in batched.coordinators} == {
        "fc-group": NONE,
        "fc-other": GROUP_DENIED,
    }


def join(client: Client, group: str) -> Any:
    return client(
        ApiKey.JOIN_GROUP,
        5,
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b""}],
    )


def group_calls(client: Client, group: str, member: str = "m", generation: int = 1) -> list[int]:
    """SyncGroup, Heartbeat and LeaveGroup's errors."""
    sync = client(
        ApiKey.SYNC_GROUP,
        3,
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        assignments=[],
    )
    heartbeat = client(
        ApiKey.HEARTBEAT,
        3,
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
    )
    leave = client(
        ApiKey.LEAVE_GROUP,
        3,
        group_id=group,
        members=[{"member_id": member, "group_instance_id": None}],
    )
    return [sync.error_code, heartbeat.error_code, leave.error_code]


def test_group_membership_needs_read_on_the_group(admin: Client, alice: Client) -> None:
    assert join(alice, "gm-group").error_code == GROUP_DENIED
    assert group_calls(alice, "gm-group") == [GROUP_DENIED] * 3
    grant(admin, ResourceType.GROUP, "gm-group", AclOperation.DESCRIBE)  # not enough
    assert join(alice, "gm-group").error_code == GROUP_DENIED
    grant(admin, ResourceType.GROUP, "gm-group", AclOperation.READ)
    joined = join(alice, "gm-group")
    assert joined.error_code in (NONE, ErrorCode.MEMBER_ID_REQUIRED)
    # Past the authorizer: the coordinator's own answers to a member it does not know.
    assert GROUP_DENIED not in group_calls(alice, "gm-group", member="stranger")


def consumer_heartbeat(client: Client, group: str, topics: list[str]) -> Any:
    return client(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        group_id=group,
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        rebalance_timeout_ms=10_000,
        subscribed_topic_names=topics,
        topic_partitions=[],
    )


def test_consumer_group_heartbeat_needs_read_and_describe_of_its_topics(
    admin: Client, alice: Client
) -> None:
    create_topic(admin, "cg-orders")
    assert consumer_heartbeat(alice, "cg-group", ["cg-orders"]).error_code == GROUP_DENIED
    grant(admin, ResourceType.GROUP, "cg-group", AclOperation.READ)
    refused = consumer_heartbeat(alice, "cg-group", ["cg-orders"])
    assert refused.error_code == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "cg-orders", AclOperation.DESCRIBE)
    joined = consumer_heartbeat(alice, "cg-group", ["cg-orders"])
    assert joined.error_code == NONE and joined.member_epoch > 0
    described = alice(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, group_ids=["cg-group", "cg-other"])
    assert {g.group_id: g.error_code for g in described.groups} == {
        "cg-group": NONE,
        "cg-other": GROUP_DENIED,
    }


def share_heartbeat(client: Client, group: str, member_id: str, topics: list[str]) -> Any:
    return client(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        group_id=group,
        member_id=member_id,
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=topics,
    )


def test_share_group_heartbeat_needs_read_and_describe_of_its_topics(
    admin: Client, alice: Client
) -> None:
    create_topic(admin, "sg-jobs")
    create_topic(admin, "sg-secret")
    assert share_heartbeat(alice, "sg-group", "a", ["sg-jobs"]).error_code == GROUP_DENIED
    grant(admin, ResourceType.GROUP, "sg-group", AclOperation.READ)
    assert share_heartbeat(alice, "sg-group", "a", ["sg-jobs"]).error_code == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "sg-jobs", AclOperation.DESCRIBE)
    joined = share_heartbeat(alice, "sg-group", "a", ["sg-jobs"])
    assert joined.error_code == NONE and joined.member_epoch > 0

    def described(client: Client) -> dict[str, int]:
        answer = client(
            ApiKey.SHARE_GROUP_DESCRIBE,
            1,
            group_ids=["sg-group", "sg-other"],
            include_authorized_operations=False,
        )
        return {g.group_id: g.error_code for g in answer.groups}

    # READ on the group implies DESCRIBE, as in Kafka.
    assert described(alice) == {"sg-group": NONE, "sg-other": GROUP_DENIED}
    # A member the admin adds on a topic alice may not describe hides the group from her.
    assert share_heartbeat(admin, "sg-group", "b", ["sg-secret"]).error_code == NONE
    assert described(alice)["sg-group"] == TOPIC_DENIED
    assert described(admin)["sg-group"] == NONE


def test_share_group_offsets_need_the_group_and_topic_operations_kafka_asks(
    admin: Client, alice: Client
) -> None:
    """DescribeShareGroupOffsets: DESCRIBE on the group and topics; AlterShareGroupOffsets:
    READ on both; DeleteShareGroupOffsets: DELETE on the group, READ on the topics."""
    create_topic(admin, "so-jobs")
    member = share_heartbeat(admin, "so-group", "so-member", ["so-jobs"])
    assert member.error_code == NONE
    admin(
        ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id="so-group", member_id="so-member",
        member_epoch=-1, rack_id=None, subscribed_topic_names=None,
    )  # fmt: skip

    def described(client: Client) -> tuple[int, dict[int, int]]:
        asked = [{"group_id": "so-group", "topics": [{"topic_name": "so-jobs", "partitions": [0]}]}]
        (group,) = client(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, groups=asked).groups
        return group.error_code, {
            p.partition_index: p.error_code for t in group.topics for p in t.partitions
        }

    def altered(client: Client) -> tuple[int, list[int]]:
        start = {"partition_index": 0, "start_offset": 0}
        answer = client(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, group_id="so-group",
            topics=[{"topic_name": "so-jobs", "partitions": [start]}],
        )  # fmt: skip
        return answer.error_code, [p.error_code for t in answer.responses for p in t.partitions]

    def deleted(client: Client) -> tuple[int, list[int]]:
        answer = client(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, group_id="so-group",
            topics=[{"topic_name": "so-jobs"}],
        )  # fmt: skip
        return answer.error_code, [t.error_code for t in answer.responses]

    assert described(alice)[0] == GROUP_DENIED
    assert altered(alice) == (GROUP_DENIED, [GROUP_DENIED])
    assert deleted(alice) == (GROUP_DENIED, [])
    grant(admin, ResourceType.GROUP, "so-group", AclOperation.READ)
    assert described(alice) == (NONE, {0: TOPIC_DENIED})
    assert altered(alice) == (NONE, [TOPIC_DENIED])
    grant(admin, ResourceType.TOPIC, "so-jobs", AclOperation.READ)
    assert described(alice) == (NONE, {0: NONE})
    assert altered(alice) == (NONE, [NONE])
    assert deleted(alice) == (GROUP_DENIED, [])
    grant(admin, ResourceType.GROUP, "so-group", AclOperation.DELETE)
    assert deleted(alice) == (NONE, [NONE])


def commit(client: Client, group: str, topics: list[str]) -> dict[str, int]:
    answer = client(
        ApiKey.OFFSET_COMMIT,
        8,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                ],
            }
            for topic in topics
        ],
    )
    return {t.name: t.partitions[0].error_code for t in answer.topics}


def fetch_offsets(client: Client, group: str, topics: list[str] | None) -> Any:
    wanted = None if topics is None else [{"name": t, "partition_indexes": [0]} for t in topics]
    return client(ApiKey.OFFSET_FETCH, 7, group_id=group, topics=wanted, require_stable=False)


def test_offset_commit_needs_read_on_group_and_topic(admin: Client, alice: Client) -> None:
    for name in ("oc-mine", "oc-theirs"):
        create_topic(admin, name)
    assert commit(alice, "oc-group", ["oc-mine"]) == {"oc-mine": GROUP_DENIED}
    grant(admin, ResourceType.GROUP, "oc-group", AclOperation.READ)
    grant(admin, ResourceType.TOPIC, "oc-mine", AclOperation.READ)
    assert commit(alice, "oc-group", ["oc-mine", "oc-theirs"]) == {
        "oc-mine": NONE,
        "oc-theirs": TOPIC_DENIED,
    }


def txn_commit(client: Client, group: str, topics: list[str]) -> dict[str, int]:
    answer = client(
        ApiKey.TXN_OFFSET_COMMIT,
        3,
        transactional_id="tc-txn",
        group_id=group,
        producer_id=1000,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                ],
            }
            for topic in topics
        ],
    )
    return {t.name: t.partitions[0].error_code for t in answer.topics}


def test_txn_offset_commit_needs_write_on_its_transactional_id_then_read_on_group_and_topic(
    admin: Client, alice: Client
) -> None:
    for name in ("tc-mine", "tc-theirs"):
        create_topic(admin, name)
    assert txn_commit(alice, "tc-group", ["tc-mine"]) == {"tc-mine": TXN_DENIED}
    grant(admin, ResourceType.TRANSACTIONAL_ID, "tc-txn", AclOperation.WRITE)
    assert txn_commit(alice, "tc-group", ["tc-mine"]) == {"tc-mine": GROUP_DENIED}
    grant(admin, ResourceType.GROUP, "tc-group", AclOperation.READ)
    grant(admin, ResourceType.TOPIC, "tc-mine", AclOperation.READ)
    assert txn_commit(alice, "tc-group", ["tc-mine", "tc-theirs"]) == {
        "tc-mine": NONE,
        "tc-theirs": TOPIC_DENIED,
    }


def test_offset_fetch_needs_describe_on_group_and_topic(admin: Client, alice: Client) -> None:
    for name in ("of-mine", "of-theirs"):
        create_topic(admin, name)
    commit(admin, "of-group", ["of-mine", "of-theirs"])
    assert fetch_offsets(alice, "of-group", ["of-mine"]).error_code == GROUP_DENIED
    grant(admin, ResourceType.GROUP, "of-group", AclOperation.DESCRIBE)
    grant(admin, ResourceType.TOPIC, "of-mine", AclOperation.DESCRIBE)
    named = fetch_offsets(alice, "of-group", ["of-mine", "of-theirs"])
    assert named.error_code == NONE
    assert {
        t.name: (t.partitions[0].error_code, t.partitions[0].committed_offset) for t in named.topics
    } == {
        "of-mine": (NONE, 1),
        "of-theirs": (TOPIC_DENIED, -1),
    }
    # Every partition: only those of topics it may describe.
    everything = fetch_offsets(alice, "of-group", None)
    assert [t.name for t in everything.topics] == ["of-mine"]
    batched = alice(
        ApiKey.OFFSET_FETCH,
        8,
        groups=[
            {"group_id": "of-group", "topics": None},
            {"group_id": "of-other", "topics": None},
        ],
        require_stable=False,
    )
    assert {g.group_id: g.error_code for g in batched.groups} == {
        "of-group": NONE,
        "of-other": GROUP_DENIED,
    }


def test_offset_delete_needs_delete_on_group_and_read_on_topic(
    admin: Client, alice: Client
) -> None:
    for name in ("od-mine", "od-theirs"):
        create_topic(admin, name)
    commit(admin, "od-group", ["od-mine", "od-theirs"])

    def deleted() -> Any:
        return alice(
            ApiKey.OFFSET_DELETE,
            0,
            group_id="od-group",
            topics=[
                {"name": t, "partitions": [{"partition_index": 0}]}
                for t in ("od-mine", "od-theirs")
            ],
        )

    assert deleted().error_code == GROUP_DENIED
    grant(admin, ResourceType.GROUP, "od-group", AclOperation.DELETE)
    grant(admin, ResourceType.TOPIC, "od-mine", AclOperation.READ)
    answer = deleted()
    assert answer.error_code == NONE
    assert {t.name: t.partitions[0].error_code for t in answer.topics} == {
        "od-mine": NONE,
        "od-theirs": TOPIC_DENIED,
    }


def test_describing_listing_and_deleting_groups(admin: Client, alice: Client) -> None:
    for group in ("dg-mine", "dg-theirs"):
        create_topic(admin, f"{group}-topic")
        commit(admin, group, [f"{group}-topic"])
    grant(admin, ResourceType.GROUP, "dg-mine", AclOperation.DESCRIBE)
    described = alice(
        ApiKey.DESCRIBE_GROUPS,
        5,
        groups=["dg-mine", "dg-theirs"],
        include_authorized_operations=True,
    )
    answers = {g.group_id: g for g in described.groups}
    assert answers["dg-mine"].error_code == NONE
    assert answers["dg-mine"].authorized_operations == bits({AclOperation.DESCRIBE})
    assert answers["dg-theirs"].error_code == GROUP_DENIED
    # Without DESCRIBE on the cluster: only the groups it may describe.
    listed = {g.group_id for g in alice(ApiKey.LIST_GROUPS, 4, states_filter=[]).groups}
    assert "dg-mine" in listed and "dg-theirs" not in listed
    assert {"dg-mine", "dg-theirs"} <= {g.group_id for g in admin(ApiKey.LIST_GROUPS, 4).groups}
    deleted = alice(ApiKey.DELETE_GROUPS, 2, groups_names=["dg-mine", "dg-theirs"])
    assert {r.group_id: r.error_code for r in deleted.results} == {
        "dg-mine": GROUP_DENIED,
        "dg-theirs": GROUP_DENIED,
    }
    grant(admin, ResourceType.GROUP, "dg-mine", AclOperation.DELETE)
    deleted = alice(ApiKey.DELETE_GROUPS, 2, groups_names=["dg-mine"])
    assert deleted.results[0].error_code == NONE


# -- topic administration ----------------------------------------------------------------


def create_topics(client: Client, *names: str) -> dict[str, Any]:
    answer = client(
        ApiKey.CREATE_TOPICS,
        5,
        topics=[{"name": n, "num_partitions": 1, "replication_factor": 1} for n in names],
        timeout_ms=10_000,
    )
    return {t.name: t for t in answer.topics}


def test_create_topics_needs_create(admin: Client, alice: Client) -> None:
    assert create_topics(alice, "ct-a")["ct-a"].error_code == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "ct-", AclOperation.CREATE, pattern=PatternType.PREFIXED)
    created = create_topics(alice, "ct-a")["ct-a"]
    # Created, but its configs are told only to a caller that may describe them.
    assert created.error_code == NONE
    assert created.topic_config_error_code == TOPIC_DENIED
    assert created.configs == [] and created.num_partitions == -1
    grant(admin, ResourceType.TOPIC, "ct-b", AclOperation.DESCRIBE_CONFIGS)
    described = create_topics(alice, "ct-b")["ct-b"]
    assert described.error_code == NONE and described.topic_config_error_code == NONE
    assert described.num_partitions == 1 and described.configs


def test_cluster_create_covers_every_topic(admin: Client, bob: Client) -> None:
    assert create_topics(bob, "cc-a")["cc-a"].error_code == TOPIC_DENIED
    grant(admin, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE, principal="User:bob")
    try:
        assert create_topics(bob, "cc-a")["cc-a"].error_code == NONE
    finally:
        answer = admin(
            ApiKey.DELETE_ACLS,
            2,
            filters=[
                {
                    "resource_type_filter": int(ResourceType.CLUSTER),
                    "resource_name_filter": CLUSTER_NAME,
                    "pattern_type_filter": int(PatternType.LITERAL),
                    "principal_filter": "User:bob",
                    "host_filter": None,
                    "operation": int(AclOperation.ANY),
                    "permission_type": int(AclPermissionType.ANY),
                }
            ],
        )
        assert answer.filter_results[0].error_code == NONE


def test_delete_topics_needs_delete(admin: Client, alice: Client) -> None:
    create_topic(admin, "dt-orders")

    def deleted(*names: str) -> dict[str, int]:
        answer = alice(ApiKey.DELETE_TOPICS, 4, topic_names=list(names), timeout_ms=10_000)
        return {r.name: r.error_code for r in answer.responses}

    # Without DELETE, a topic that does not exist is refused alike.
    assert deleted("dt-orders", "dt-nowhere") == {
        "dt-orders": TOPIC_DENIED,
        "dt-nowhere": TOPIC_DENIED,
    }
    grant(admin, ResourceType.TOPIC, "dt-", AclOperation.DELETE, pattern=PatternType.PREFIXED)
    assert deleted("dt-orders", "dt-nowhere") == {
        "dt-orders": NONE,
        "dt-nowhere": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_delete_topics_by_id_hides_the_name_without_describe(admin: Client, bob: Client) -> None:
    create_topic(admin, "di-orders")
    [topic] = metadata(admin, ["di-orders"]).topics
    answer = bob(ApiKey.DELETE_TOPICS, 6, topics=[{"name": None, "topic_id": topic.topic_id}])
    [result] = answer.responses
    assert result.error_code == TOPIC_DENIED and result.name is None


def test_delete_records_and_create_partitions(admin: Client, alice: Client) -> None:
    create_topic(admin, "dr-orders")

    def delete_records() -> int:
        answer = alice(
            ApiKey.DELETE_RECORDS,
            2,
            topics=[{"name": "dr-orders", "partitions": [{"partition_index": 0, "offset": 0}]}],
            timeout_ms=10_000,
        )
        return answer.topics[0].partitions[0].error_code

    def create_partitions() -> int:
        answer = alice(
            ApiKey.CREATE_PARTITIONS,
            2,
            topics=[{"name": "dr-orders", "count": 2, "assignments": None}],
            timeout_ms=10_000,
            validate_only=False,
        )
        return answer.results[0].error_code

    assert delete_records() == TOPIC_DENIED
    assert create_partitions() == TOPIC_DENIED
    grant(admin, ResourceType.TOPIC, "dr-orders", AclOperation.DELETE, AclOperation.ALTER)
    assert delete_records() == NONE
    assert create_partitions() == NONE


# -- configs, log dirs, cluster ----------------------------------------------------------


def describe_configs(client: Client, resource_type: int, name: str) -> int:
    answer = client(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        resources=[
            {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
        ],
    )
    return answer.results[0].error_code


def alter_configs(client: Client, resource_type: int, name: str, key: str, value: str) -> int:
    config = {"name": key, "config_operation": 0, "value": value}
    resource = {"resource_type": resource_type, "resource_name": name, "configs": [config]}
    answer = client(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, resources=[resource], validate_only=True)
    return answer.responses[0].error_code


def legacy_alter_configs(client: Client, name: str) -> int:
    resource = {
        "resource_type": TOPIC_CONFIGS,
        "resource_name": name,
        "configs": [{"name": "retention.ms", "value": "60000"}],
    }
    answer = client(ApiKey.ALTER_CONFIGS, 2, resources=[resource], validate_only=True)
    return answer.responses[0].error_code


def test_configs_need_describe_configs_and_alter_configs(admin: Client, alice: Client) -> None:
    create_topic(admin, "cf-orders")
    assert describe_configs(alice, TOPIC_CONFIGS, "cf-orders") == TOPIC_DENIED
    assert describe_configs(alice, BROKER_CONFIGS, "0") == CLUSTER_DENIED
    assert describe_configs(alice, GROUP_CONFIGS, "cf-group") == GROUP_DENIED
    retention = ("retention.ms", "60000")
    timeout = ("consumer.session.timeout.ms", "45000")
    assert alter_configs(alice, TOPIC_CONFIGS, "cf-orders", *retention) == TOPIC_DENIED
    assert legacy_alter_configs(alice, "cf-orders") == TOPIC_DENIED
    assert alter_configs(alice, BROKER_CONFIGS, "0", "num.partitions", "2") == CLUSTER_DENIED
    assert alter_configs(alice, GROUP_CONFIGS, "cf-group", *timeout) == GROUP_DENIED
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    grant(admin, ResourceType.TOPIC, "cf-orders", AclOperation.ALTER_CONFIGS)
    grant(admin, ResourceType.GROUP, "cf-group", AclOperation.ALTER_CONFIGS)
    assert describe_configs(alice, TOPIC_CONFIGS, "cf-orders") == NONE
    assert describe_configs(alice, GROUP_CONFIGS, "cf-group") == NONE
    assert alter_configs(alice, TOPIC_CONFIGS, "cf-orders", *retention) == NONE
    assert legacy_alter_configs(alice, "cf-orders") == NONE
    assert alter_configs(alice, GROUP_CONFIGS, "cf-group", *timeout) == NONE
    # The super user may; the broker then says why its configs are not changed online.
    assert describe_configs(admin, BROKER_CONFIGS, "0") == NONE
    assert alter_configs(admin, BROKER_CONFIGS, "0", "num.partitions", "2") not in (
        NONE,
        CLUSTER_DENIED,
    )


def test_client_metrics_need_the_clusters_configs_operations_and_telemetry_none(
    admin: Client, alice: Client, anonymous: Client
) -> None:
    """KIP-714: subscriptions are the cluster's configs; pushing and asking need nothing."""
    metrics = ("metrics", "org.apache.kafka.")
    assert describe_configs(alice, CLIENT_METRICS_CONFIGS, "authz-subscription") == CLUSTER_DENIED
    assert alter_configs(alice, CLIENT_METRICS_CONFIGS, "authz-subscription", *metrics) == (
        CLUSTER_DENIED
    )
    assert alice(ApiKey.LIST_CONFIG_RESOURCES, 0).error_code == CLUSTER_DENIED
    assert describe_configs(admin, CLIENT_METRICS_CONFIGS, "authz-subscription") == NONE
    assert alter_configs(admin, CLIENT_METRICS_CONFIGS, "authz-subscription", *metrics) == NONE
    assert admin(ApiKey.LIST_CONFIG_RESOURCES, 0).error_code == NONE
    asked = anonymous(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, client_instance_id=uuid.UUID(int=0))
    assert asked.error_code == NONE


def test_log_dirs_need_describe_on_the_cluster(admin: Client, alice: Client) -> None:
    assert alice(ApiKey.DESCRIBE_LOG_DIRS, 3, topics=None).error_code == CLUSTER_DENIED
    # Before v3 the answer has no error code: nothing is described.
    assert alice(ApiKey.DESCRIBE_LOG_DIRS, 1, topics=None).results == []
    answer = admin(ApiKey.DESCRIBE_LOG_DIRS, 3, topics=None)
    assert answer.error_code == NONE and answer.results


def init_producer_id(client: Client, transactional_id: str | None = None) -> int:
    answer = client(
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=transactional_id,
        transaction_timeout_ms=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    return answer.error_code


def test_idempotent_producer_ids(admin: Client, alice: Client, bob: Client) -> None:
    # Nothing granted: no producer id.
    assert init_producer_id(bob) == CLUSTER_DENIED
    assert init_producer_id(bob, "ip-txn") == TXN_DENIED
    # WRITE on any topic is enough (Kafka 2.8+), as is IDEMPOTENT_WRITE on the cluster.
    grant(admin, ResourceType.TOPIC, "ip-orders", AclOperation.WRITE)
    assert init_producer_id(alice) == NONE
    assert init_producer_id(admin) == NONE


def _any_acl() -> dict[str, Any]:
    return {
        "resource_type_filter": int(ResourceType.ANY),
        "resource_name_filter": None,
        "pattern_type_filter": int(PatternType.ANY),
        "principal_filter": None,
        "host_filter": None,
        "operation": int(AclOperation.ANY),
        "permission_type": int(AclPermissionType.ANY),
    }


def test_acls_and_credentials_need_the_cluster(admin: Client, bob: Client) -> None:
    assert bob(ApiKey.DESCRIBE_ACLS, 2, **_any_acl()).error_code == CLUSTER_DENIED
    created = bob(
        ApiKey.CREATE_ACLS,
        2,
        creations=[
            {
                "resource_type": int(ResourceType.TOPIC),
                "resource_name": "anything",
                "resource_pattern_type": int(PatternType.LITERAL),
                "principal": "User:bob",
                "host": "*",
                "operation": int(AclOperation.ALL),
                "permission_type": int(AclPermissionType.ALLOW),
            }
        ],
    )
    assert [r.error_code for r in created.results] == [CLUSTER_DENIED]
    deleted = bob(ApiKey.DELETE_ACLS, 2, filters=[_any_acl()])
    assert [r.error_code for r in deleted.filter_results] == [CLUSTER_DENIED]
    assert bob(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=None).error_code == CLUSTER_DENIED
    altered = bob(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        deletions=[{"name": "bob", "mechanism": 1}],
        upsertions=[],
    )
    assert [r.error_code for r in altered.results] == [CLUSTER_DENIED]
    assert admin(ApiKey.DESCRIBE_ACLS, 2, **_any_acl()).error_code == NONE
    assert admin(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=None).error_code == NONE


# -- real clients with the ACLs the CLI grants --------------------------------------------


def confluent_settings(secured: Secured, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{secured.sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": MECHANISM,
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def test_confluent_kafka_with_the_producer_and_consumer_acls(
    secured: Secured, admin: Client
) -> None:
    topic, group = "e2e-orders", "e2e-group"
    create_bindings(
        admin,
        bindings_to_add(AclOptions(topics=[topic], producer=True, allow_principals=["User:dave"])),
    )
    create_bindings(
        admin,
        bindings_to_add(
            AclOptions(
                topics=[topic], groups=[group], consumer=True, allow_principals=["User:carol"]
            )
        ),
    )
    errors: list[Any] = []
    producer = Producer({**confluent_settings(secured, "dave"), "error_cb": errors.append})
    values = [f"record-{n}".encode() for n in range(3)]
    for value in values:
        # The topic does not exist yet: the producer's CREATE has it auto-created.
        producer.produce(
            topic, value, on_delivery=lambda error, _: errors.append(error) if error else None
        )
    assert producer.flush(30) == 0 and not errors, errors
    consumer = Consumer(
        {
            **confluent_settings(secured, "carol"),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
        assert seen == values
        consumer.commit(asynchronous=False)
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=15)
        assert committed.offset == len(values)
    finally:
        consumer.close()


# -- the authorizer log and metrics --------------------------------------------------------


def test_denials_are_logged_and_decisions_counted(
    secured: Secured, runner: asyncio.Runner, admin: Client
) -> None:
    create_topic(admin, "lg-orders")
    erin = Client(runner, "127.0.0.1", secured.sasl_port, "erin")
    try:
        assert produce(erin, "lg-orders") == TOPIC_DENIED
    finally:
        erin.close()
    line = (
        "Principal = User:erin is Denied Operation = Write from host = 127.0.0.1 on resource ="
        " Topic:LITERAL:lg-orders for request = Produce with resourceRefCount = 1"
    )
    deadline = time.monotonic() + 10
    while line not in secured.broker.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert line in secured.broker.log()
    url = f"http://127.0.0.1:{secured.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    denied = (
        'herdless_authorizer_decisions_total{operation="Write",resource_type="Topic",'
        'result="denied"}'
    )
    allowed = (
        'herdless_authorizer_decisions_total{operation="Write",resource_type="Topic",'
        'result="allowed"}'
    )
    assert denied in text and allowed in text


def test_no_password_in_the_broker_log(secured: Secured) -> None:
    log = secured.broker.log()
    assert not [user for user, password in PASSWORDS.items() if password in log]


def test_elections_need_alter_and_controlled_shutdowns_cluster_action_on_the_cluster(
    admin: Client, alice: Client
) -> None:
    create_topic(admin, "elected")
    wanted = {
        "election_type": 0,
        "topic_partitions": [{"topic": "elected", "partitions": [0]}],
        "timeout_ms": 1000,
    }
    denied = alice(ApiKey.ELECT_LEADERS, 2, **wanted)
    assert denied.error_code == CLUSTER_DENIED
    assert denied.replica_election_results[0].partition_result[0].error_code == CLUSTER_DENIED
    allowed = admin(ApiKey.ELECT_LEADERS, 2, **wanted)
    assert allowed.error_code == NONE
    assert allowed.replica_election_results[0].partition_result[0].error_code == (
        ErrorCode.ELECTION_NOT_NEEDED
    )
    asked = {"broker_id": 0, "broker_epoch": -1}
    assert alice(ApiKey.CONTROLLED_SHUTDOWN, 3, **asked).error_code == CLUSTER_DENIED
    # One broker alone is its own controller, with nowhere to move its partitions.
    answer = admin(ApiKey.CONTROLLED_SHUTDOWN, 3, **asked)
    assert (answer.error_code, answer.remaining_partitions) == (NONE, [])


def test_client_quotas_need_describe_configs_and_alter_configs_on_the_cluster(
    admin: Client, alice: Client, bob: Client
) -> None:
    quota = {
        "entity": [{"entity_type": "client-id", "entity_name": "acl-app"}],
        "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
    }
    denied = bob(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, components=[], strict=False)
    assert (denied.error_code, denied.entries) == (CLUSTER_DENIED, None)
    altered = bob(ApiKey.ALTER_CLIENT_QUOTAS, 1, entries=[quota], validate_only=False)
    assert [e.error_code for e in altered.entries] == [CLUSTER_DENIED]
    assert admin(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, components=[], strict=False).error_code == NONE
    grant(admin, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE_CONFIGS)
    try:
        assert (
            alice(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, components=[], strict=False).error_code == NONE
        )
        altered = alice(ApiKey.ALTER_CLIENT_QUOTAS, 1, entries=[quota], validate_only=True)
        assert [e.error_code for e in altered.entries] == [CLUSTER_DENIED]
        grant(admin, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALTER_CONFIGS)
        altered = alice(ApiKey.ALTER_CLIENT_QUOTAS, 1, entries=[quota], validate_only=True)
        assert [e.error_code for e in altered.entries] == [NONE]
    finally:
        revoke(admin, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE_CONFIGS)
        revoke(admin, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALTER_CONFIGS)


def test_reassignments_need_alter_and_their_list_describe_on_the_cluster(
    admin: Client, alice: Client
) -> None:
    create_topic(admin, "reassigned")

    def partitions(replicas: list[int] | None) -> dict[str, object]:
        return {
            "timeout_ms": 1000,
            "topics": [
                {"name": "reassigned", "partitions": [{"partition_index": 0, "replicas": replicas}]}
            ],
        }

    denied = alice(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, **partitions([0]))
    assert denied.error_code == CLUSTER_DENIED
    assert denied.responses[0].partitions[0].error_code == CLUSTER_DENIED
    # One broker alone: reassigned to itself is nothing to do, and nothing is in progress.
    allowed = admin(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, **partitions([0]))
    assert allowed.responses[0].partitions[0].error_code == NONE
    elsewhere = admin(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, **partitions([5]))
    assert elsewhere.responses[0].partitions[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    cancelled = admin(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, **partitions(None))
    assert cancelled.responses[0].partitions[0].error_code == (
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    )
    listing = {"timeout_ms": 1000, "topics": None}
    assert alice(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, **listing).error_code == CLUSTER_DENIED
    listed = admin(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, **listing)
    assert (listed.error_code, listed.topics) == (NONE, [])

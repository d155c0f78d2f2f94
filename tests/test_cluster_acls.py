"""ACLs in a three-broker cluster: kept in ZooKeeper as Kafka keeps them, changed through
any broker, and applied by every broker within a second of the change."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kazoo.client import KazooClient

from tests.support.broker import BrokerProcess
from tests.support.cluster import ClusterProcesses, running_cluster
from tests.support.wire import Wire

SETTINGS = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
}
# The promise: a change made through one broker is applied by all within 1 s.
PROPAGATION_S = 1.0
TOPIC, PREFIXED, LITERAL, ANY = 2, 4, 3, 1
READ, ALLOW = 3, 3
ANY_FILTER = {
    "resource_type_filter": ANY,
    "resource_name_filter": None,
    "pattern_type_filter": ANY,
    "principal_filter": None,
    "host_filter": None,
    "operation": ANY,
    "permission_type": ANY,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with running_cluster(tmp_path_factory.mktemp("cluster-acls"), 3, **SETTINGS) as processes:
        yield processes


def call(broker: BrokerProcess, request: Any, response_class: Any) -> Any:
    wire = Wire(broker)
    try:
        return wire.call(request, response_class)
    finally:
        wire.close()


def create_on(broker: BrokerProcess, name: str, principal: str, pattern: int = LITERAL) -> None:
    creation = CreateAclsRequest.AclCreation(
        resource_type=TOPIC,
        resource_name=name,
        resource_pattern_type=pattern,
        principal=principal,
        host="*",
        operation=READ,
        permission_type=ALLOW,
    )
    response = call(broker, CreateAclsRequest[3](creations=[creation]), CreateAclsResponse[3])
    assert [r.error_code for r in response.results] == [0], response


def delete_on(broker: BrokerProcess, name: str) -> int:
    """DeleteAcls of every ACL on the topic `name`; how many were deleted."""
    acl_filter = DeleteAclsRequest.DeleteAclsFilter(
        **{**ANY_FILTER, "resource_type_filter": TOPIC, "resource_name_filter": name}
    )
    response = call(broker, DeleteAclsRequest[3](filters=[acl_filter]), DeleteAclsResponse[3])
    (result,) = response.filter_results
    assert result.error_code == 0, result
    return len(result.matching_acls)


def described_by(broker: BrokerProcess, name: str) -> set[tuple[str, int, str]]:
    """(resource name, pattern type, principal) of each ACL on the topic, as `broker` says."""
    request = DescribeAclsRequest[3](
        **{**ANY_FILTER, "resource_type_filter": TOPIC, "resource_name_filter": name}
    )
    response = call(broker, request, DescribeAclsResponse[3])
    assert response.error_code == 0, response
    return {
        (resource.resource_name, resource.pattern_type, acl.principal)
        for resource in response.resources
        for acl in resource.acls
    }


def seconds_until_all_describe(
    cluster: ClusterProcesses, name: str, wanted: set[tuple[str, int, str]]
) -> float:
    started = time.monotonic()
    pending = dict(cluster.brokers)
    while pending:
        for broker_id, broker in list(pending.items()):
            if described_by(broker, name) == wanted:
                del pending[broker_id]
        elapsed = time.monotonic() - started
        if pending and elapsed > 10:
            raise AssertionError(f"brokers {sorted(pending)} never described {wanted}")
        time.sleep(0.01)
    return time.monotonic() - started


def test_an_acl_created_through_one_broker_is_served_by_all_within_a_second(
    cluster: ClusterProcesses,
) -> None:
    first, second, _ = cluster.brokers.values()
    create_on(first, "propagated", "User:alice")
    wanted = {("propagated", LITERAL, "User:alice")}
    assert seconds_until_all_describe(cluster, "propagated", wanted) <= PROPAGATION_S
    create_on(second, "propagated", "User:bob", PREFIXED)
    wanted.add(("propagated", PREFIXED, "User:bob"))
    assert seconds_until_all_describe(cluster, "propagated", wanted) <= PROPAGATION_S
    assert delete_on(cluster.brokers[3], "propagated") == 2
    assert seconds_until_all_describe(cluster, "propagated", set()) <= PROPAGATION_S


def test_acls_are_in_zookeeper_where_kafka_keeps_them(cluster: ClusterProcesses) -> None:
    create_on(cluster.brokers[1], "in-zk", "User:carol")
    create_on(cluster.brokers[2], "in-zk-", "User:carol", PREFIXED)
    client = KazooClient(hosts=cluster.zookeeper.connect)
    client.start(timeout=10)
    try:
        literal, _ = client.get("/kafka-acl/Topic/in-zk")
        prefixed, _ = client.get("/kafka-acl-extended/prefixed/Topic/in-zk-")
        literal_changes = client.get_children("/kafka-acl-changes")
        extended_changes = client.get_children("/kafka-acl-extended-changes")
    finally:
        client.stop()
        client.close()
    entry = {"principal": "User:carol", "permissionType": "Allow", "operation": "Read", "host": "*"}
    assert json.loads(literal) == json.loads(prefixed) == {"version": 1, "acls": [entry]}
    assert literal_changes and extended_changes
    assert all(name.startswith("acl_changes_") for name in literal_changes + extended_changes)


def test_acls_created_at_once_through_every_broker_are_all_kept(cluster: ClusterProcesses) -> None:
    brokers = list(cluster.brokers.values())
    principals = [f"User:u{i}" for i in range(12)]
    start = threading.Barrier(len(principals))
    failures: list[BaseException] = []

    def create(index: int, principal: str) -> None:
        start.wait()
        try:
            create_on(brokers[index % len(brokers)], "contended", principal)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=create, args=pair) for pair in enumerate(principals)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    wanted = {("contended", LITERAL, p) for p in principals}
    seconds_until_all_describe(cluster, "contended", wanted)


def test_a_restarted_broker_reads_every_acl_from_zookeeper(cluster: ClusterProcesses) -> None:
    create_on(cluster.brokers[1], "before-restart", "User:dave")
    cluster.restart(3)
    cluster.wait_registered(3)
    assert described_by(cluster.brokers[3], "before-restart") == {
        ("before-restart", LITERAL, "User:dave")
    }
    # And it follows changes again.
    delete_on(cluster.brokers[2], "before-restart")
    assert seconds_until_all_describe(cluster, "before-restart", set()) <= PROPAGATION_S


def test_confluent_kafka_manages_the_clusters_acls(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    acl = AclBinding(
        ResourceType.GROUP,
        "cluster-group",
        ResourcePatternType.LITERAL,
        "User:erin",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([acl], request_timeout=15).values():
        assert future.result() is None
    on_group = AclBindingFilter(
        ResourceType.GROUP,
        "cluster-group",
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    # Asked of any broker: perhaps one still applying the change (milliseconds).
    deadline = time.monotonic() + 10
    while admin.describe_acls(on_group, request_timeout=15).result() != [acl]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (future,) = admin.delete_acls([on_group], request_timeout=15).values()
    assert future.result() == [acl]


def test_followers_replicate_with_the_authorizer_on(cluster: ClusterProcesses) -> None:
    """Followers fetch as the brokers' principal (User:ANONYMOUS on PLAINTEXT between
    brokers, a super user here), which Kafka asks CLUSTER_ACTION of: every replica
    catches up, and a produce with acks=all is acknowledged."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = "replicated-under-acls"
    futures = admin.create_topics([NewTopic(topic, 3, 3)], request_timeout=15)
    futures[topic].result(timeout=30)
    cluster.wait_serving(topic)
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for n in range(30):
        producer.produce(
            topic, f"v{n}".encode(), on_delivery=lambda e, _: errors.append(e) if e else None
        )
    assert producer.flush(30) == 0 and not errors, errors
    cluster.wait_serving(topic)

"""ACLs in ZooKeeper where and as Kafka 3.x keeps them: the znodes, their JSON, the change
notifications, and conditional writes that never lose a concurrent writer's ACLs."""

from __future__ import annotations

import json
import threading

import pytest
from kazoo.client import KazooClient

from herdless.cluster import acl_layout
from herdless.cluster.errors import MalformedZNode
from herdless.security.acls import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tests.cluster.conftest import OpenStore, Recorder

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
TEAM = ResourcePattern(ResourceType.GROUP, "team-", PatternType.PREFIXED)
READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
DENY_WRITE = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)


def test_the_acl_paths_are_kafkas(open_store: OpenStore, raw: KazooClient) -> None:
    open_store().create_acl_paths()
    assert sorted(raw.get_children("/kafka-acl")) == [
        "Cluster",
        "DelegationToken",
        "Group",
        "Topic",
        "TransactionalId",
        "User",
    ]
    assert raw.get_children("/kafka-acl-extended") == ["prefixed"]
    assert "TransactionalId" in raw.get_children("/kafka-acl-extended/prefixed")
    assert raw.exists("/kafka-acl-changes") and raw.exists("/kafka-acl-extended-changes")


def test_a_literal_patterns_acls_and_their_notification(
    open_store: OpenStore, raw: KazooClient
) -> None:
    store = open_store()
    store.create_acl_paths()
    before, after = store.update_resource_acls(ORDERS, lambda acls: acls | {READ})
    assert (before, after) == (frozenset(), frozenset({READ}))
    data, _ = raw.get("/kafka-acl/Topic/orders")
    assert data == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"Read","host":"*"}]}'
    )
    (change,) = raw.get_children("/kafka-acl-changes")
    assert change.startswith("acl_changes_")
    assert raw.get(f"/kafka-acl-changes/{change}")[0] == b"TOPIC:orders"
    assert store.acl_change("/kafka-acl-changes", change) == ORDERS


def test_a_prefixed_patterns_acls_and_their_notification(
    open_store: OpenStore, raw: KazooClient
) -> None:
    store = open_store()
    store.create_acl_paths()
    store.update_resource_acls(TEAM, lambda acls: acls | {DENY_WRITE})
    data, _ = raw.get("/kafka-acl-extended/prefixed/Group/team-")
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:bob",
                "permissionType": "Deny",
                "operation": "Write",
                "host": "10.0.0.1",
            }
        ],
    }
    (change,) = raw.get_children("/kafka-acl-extended-changes")
    assert raw.get(f"/kafka-acl-extended-changes/{change}")[0] == (
        b'{"version":1,"resourceType":"GROUP","name":"team-","patternType":"PREFIXED"}'
    )
    assert store.acl_change("/kafka-acl-extended-changes", change) == TEAM


def test_removing_the_last_acl_removes_the_znode(open_store: OpenStore, raw: KazooClient) -> None:
    store = open_store()
    store.create_acl_paths()
    store.update_resource_acls(ORDERS, lambda acls: acls | {READ, DENY_WRITE})
    store.update_resource_acls(ORDERS, lambda acls: acls - {READ})
    assert store.resource_acls(ORDERS).value == {DENY_WRITE}  # type: ignore[union-attr]
    store.update_resource_acls(ORDERS, lambda acls: frozenset())
    assert not raw.exists("/kafka-acl/Topic/orders")
    assert len(raw.get_children("/kafka-acl-changes")) == 3
    # No change, no write and no notification.
    assert store.update_resource_acls(ORDERS, lambda acls: acls) == (frozenset(), frozenset())
    assert len(raw.get_children("/kafka-acl-changes")) == 3


def test_concurrent_writers_keep_each_others_acls(open_store: OpenStore) -> None:
    """Brokers adding ACLs to one pattern at once: every ACL survives (each write is
    conditional on the version its writer read, and a lost race re-reads)."""
    stores = [open_store(), open_store(), open_store()]
    stores[0].create_acl_paths()
    wanted = {
        AccessControlEntry(f"User:u{i}", "*", AclOperation.READ, AclPermissionType.ALLOW)
        for i in range(30)
    }
    start = threading.Barrier(len(wanted))

    def add(index: int, entry: AccessControlEntry) -> None:
        start.wait()
        stores[index % len(stores)].update_resource_acls(
            ORDERS, lambda acls: acls | {entry}, attempts=100
        )

    threads = [threading.Thread(target=add, args=(i, e)) for i, e in enumerate(wanted)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert stores[1].resource_acls(ORDERS).value == wanted  # type: ignore[union-attr]


def test_all_acls_reads_what_kafka_wrote(open_store: OpenStore, raw: KazooClient) -> None:
    store = open_store()
    store.create_acl_paths()
    # Another key order and a resource type this broker does not know: read, and ignored.
    raw.create(
        "/kafka-acl/TransactionalId/tx-1",
        b'{"acls":[{"host":"*","operation":"Write","principal":"User:p","permissionType":"Allow"}],'
        b'"version":1}',
    )
    raw.create("/kafka-acl/Martian/x", b'{"version":1,"acls":[]}', makepath=True)
    raw.create("/kafka-acl/Topic/broken", b"not json")
    store.update_resource_acls(TEAM, lambda acls: acls | {DENY_WRITE})
    assert store.all_acls() == {
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-1", PatternType.LITERAL): {
            AccessControlEntry("User:p", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        },
        TEAM: {DENY_WRITE},
    }


def test_watching_changes_and_purging_old_ones(
    open_store: OpenStore, raw: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, watcher = open_store(), open_store()
    writer.create_acl_paths()
    seen: Recorder[list[str]] = Recorder()
    watcher.watch_acl_changes(acl_layout.LITERAL_CHANGES_PATH, seen)
    writer.update_resource_acls(ORDERS, lambda acls: acls | {READ})
    names = seen.wait_for(lambda names: len(names) == 1)
    watcher.purge_acl_changes(acl_layout.LITERAL_CHANGES_PATH, names)
    assert raw.get_children("/kafka-acl-changes") == names  # younger than 15 minutes
    monkeypatch.setattr(acl_layout, "CHANGE_EXPIRATION_MS", -60_000)
    watcher.purge_acl_changes(acl_layout.LITERAL_CHANGES_PATH, names)
    assert raw.get_children("/kafka-acl-changes") == []
    seen.wait_for(lambda names: names == [])


def test_change_notifications_kafka_may_have_written() -> None:
    literal = acl_layout.LITERAL_CHANGES_PATH
    assert acl_layout.decode_change(literal, "n", b"Topic:a:b") == ResourcePattern(
        ResourceType.TOPIC, "a:b", PatternType.LITERAL
    )
    assert acl_layout.decode_change(literal, "n", b"TRANSACTIONALID:t").resource_type == (
        ResourceType.TRANSACTIONAL_ID
    )
    for bad in (b"orders", b"Martian:x", b"\xff"):
        with pytest.raises(MalformedZNode):
            acl_layout.decode_change(literal, "n", bad)
    extended = acl_layout.EXTENDED_CHANGES_PATH
    for bad in (b"{}", b'{"version":2,"resourceType":"TOPIC","name":"a","patternType":"PREFIXED"}'):
        with pytest.raises(MalformedZNode):
            acl_layout.decode_change(extended, "n", bad)
    assert acl_layout.change_sequence("acl_changes_0000000012") == 12
    assert acl_layout.change_sequence("other") is None

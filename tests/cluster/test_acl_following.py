"""A broker's ACLs follow ZooKeeper (broker/auth/acl_store.py's ZooKeeperAcls): what another broker
changes is applied from its notification, a pattern only named by a filter is deleted
all the same, and after a lost session everything is read again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from kazoo.client import KazooClient

from herdless.broker.auth.acl_store import ZooKeeperAcls
from herdless.security.acls import (
    ANY_ENTRY,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from herdless.security.authorizer import AuthorizerSettings
from herdless.security.principal import user
from tests.cluster.conftest import OpenStore, expire_session

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
LOGS = ResourcePattern(ResourceType.TOPIC, "logs-", PatternType.PREFIXED)
READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
SETTINGS = AuthorizerSettings()


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, "not within the time given"
        await asyncio.sleep(0.01)
    return time.monotonic() - started


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


def test_a_change_through_one_broker_is_applied_by_another(open_store: OpenStore) -> None:
    async def scenario() -> None:
        one_store, other_store = open_store(), open_store()
        one = ZooKeeperAcls(SETTINGS, lambda: one_store)
        other = ZooKeeperAcls(SETTINGS, lambda: other_store)
        await one.start()
        await other.start()
        try:
            assert await one.create([AclBinding(ORDERS, READ), AclBinding(LOGS, READ)]) == [
                None,
                None,
            ]
            await eventually(lambda: other.cache.get(ORDERS) == {READ})
            await eventually(lambda: other.cache.get(LOGS) == {READ})
            assert other.authorizer.authorize(
                user("alice"), "10.0.0.1", AclOperation.DESCRIBE, ResourceType.TOPIC, "logs-1"
            )
            (result,) = await other.delete(
                [
                    AclBindingFilter(
                        ResourcePatternFilter(ResourceType.TOPIC, None, PatternType.ANY), ANY_ENTRY
                    )
                ]
            )
            assert {d.binding.pattern for d in result.deleted} == {ORDERS, LOGS}
            await eventually(lambda: one.cache.patterns() == [])
        finally:
            await one.stop()
            await other.stop()

    run(scenario)


def test_a_filter_naming_one_pattern_deletes_acls_not_seen_yet(
    open_store: OpenStore, raw: KazooClient
) -> None:
    async def scenario() -> None:
        store = open_store()
        acls = ZooKeeperAcls(SETTINGS, lambda: store)
        await acls.start()
        try:
            # Written as by a broker whose notification has not arrived here.
            raw.create(
                "/kafka-acl/Topic/unseen",
                b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
                b'"operation":"Read","host":"*"}]}',
            )
            exact = ResourcePatternFilter(ResourceType.TOPIC, "unseen", PatternType.LITERAL)
            (result,) = await acls.delete([AclBindingFilter(exact, ANY_ENTRY)])
            assert [d.binding.pattern.name for d in result.deleted] == ["unseen"]
            assert not raw.exists("/kafka-acl/Topic/unseen")
        finally:
            await acls.stop()

    run(scenario)


def test_after_a_lost_session_every_acl_is_read_again(
    open_store: OpenStore, raw: KazooClient, connect: str
) -> None:
    async def scenario() -> None:
        store = open_store()
        acls = ZooKeeperAcls(SETTINGS, lambda: store)
        await acls.start()
        try:
            # A change whose notification this broker never sees (purged while it was away).
            raw.create(
                "/kafka-acl/Topic/orders",
                b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
                b'"operation":"Read","host":"*"}]}',
            )
            await asyncio.to_thread(expire_session, store, connect)
            await eventually(lambda: acls.cache.get(ORDERS) == {READ}, timeout=15)
        finally:
            await acls.stop()

    run(scenario)

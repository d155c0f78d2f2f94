"""Membership turns ZooKeeper's watches into the metadata view and into calls on its
listener, in order, each after the view has the change. A fake store stands in for
ZooKeeper here; tests/test_cluster*.py prove the same against a real one."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from herdless.cluster import BrokerRegistration, PartitionState, SessionState, TopicAssignment
from herdless.cluster.layout import Versioned
from herdless.cluster.membership import Membership, MembershipConfig
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.cluster.store import Watch
from herdless.security.zookeeper import ZooKeeperSecurity

NODE = 1
OTHER = 2
TOPIC = "orders"
ASSIGNMENT = TopicAssignment(TOPIC, uuid.uuid4(), {0: (NODE, OTHER), 1: (OTHER, NODE)})


def state(leader: int, epoch: int = 0) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, isr=(NODE, OTHER), controller_epoch=1)


class FakeStore:
    """The calls Membership (and the controller it runs) make, on ZooKeeper as the test
    sets it; a watch delivers at once when set, as kazoo's do, and on fire()."""

    def __init__(self) -> None:
        self.session_id = 1
        self.deadline = math.inf
        self.brokers = {OTHER: BrokerRegistration(OTHER, "127.0.0.1", 9093)}
        self.controller: int | None = OTHER
        self.topics = {TOPIC: ASSIGNMENT}
        self.configs = {TOPIC: {"retention.ms": "1000"}}
        self.states = {(TOPIC, 0): state(NODE), (TOPIC, 1): state(OTHER)}
        self.registered: list[int] = []
        self.closed = False
        self._watches: dict[object, list[tuple[Watch, Callable[[Any], None]]]] = {}
        self._session_listeners: list[Callable[[SessionState], None]] = []

    # -- what a test does to ZooKeeper -------------------------------------------------

    def fire(self, key: object, value: object) -> None:
        for watch, callback in self._watches.get(key, []):
            if not watch.cancelled:
                callback(value)

    def session_changed(self, session: SessionState) -> None:
        for listener in self._session_listeners:
            listener(session)

    def watching(self, key: object) -> bool:
        return any(not watch.cancelled for watch, _ in self._watches.get(key, []))

    # -- the store's face --------------------------------------------------------------

    def _watch(self, key: object, callback: Callable[[Any], None], value: object) -> Watch:
        watch = Watch()
        self._watches.setdefault(key, []).append((watch, callback))
        callback(value)
        return watch

    def cluster_id(self) -> str:
        return "fake-cluster"

    def register_broker(self, registration: BrokerRegistration) -> int:
        self.registered.append(self.session_id)
        self.brokers[registration.broker_id] = registration
        return self.session_id

    def renew_lease(self, timeout: float | None = None) -> float:
        return self.deadline

    def lease_deadline(self) -> float:
        return self.deadline

    def live_brokers(self) -> dict[int, BrokerRegistration]:
        return dict(self.brokers)

    def add_session_listener(self, callback: Callable[[SessionState], None]) -> Watch:
        self._session_listeners.append(callback)
        return Watch()

    def watch_brokers(self, callback: Callable[[list[int]], None]) -> Watch:
        return self._watch("brokers", callback, sorted(self.brokers))

    def watch_controller(self, callback: Callable[[int | None], None]) -> Watch:
        return self._watch("controller", callback, self.controller)

    def watch_topic_names(self, callback: Callable[[set[str]], None]) -> Watch:
        return self._watch("topics", callback, set(self.topics))

    def watch_topic_config(self, name: str, callback: Callable[[dict[str, str]], None]) -> Watch:
        return self._watch(("config", name), callback, self.configs.get(name, {}))

    def watch_topic(self, name: str, callback: Callable[[Any], None]) -> Watch:
        return self._watch(("topic", name), callback, self.topic(name))

    def watch_partition_state(
        self, topic: str, partition: int, callback: Callable[[Any], None]
    ) -> Watch:
        found = self.get_partition_state(topic, partition)
        return self._watch(("state", topic, partition), callback, found)

    def watch_pending_deletions(self, callback: Callable[[set[str]], None]) -> Watch:
        return self._watch("deletions", callback, set())

    def watch_log_dir_events(self, callback: Callable[[list[str]], None]) -> Watch:
        return self._watch("log dir events", callback, [])

    def topic(self, name: str) -> Versioned[TopicAssignment] | None:
        assignment = self.topics.get(name)
        return None if assignment is None else Versioned(assignment, 0)

    def get_partition_state(self, topic: str, partition: int) -> Versioned[PartitionState] | None:
        found = self.states.get((topic, partition))
        return None if found is None else Versioned(found, 0)

    def try_elect_controller(self, broker_id: int) -> None:
        return None  # another broker is controller

    def close(self) -> None:
        self.closed = True


class Listener:
    """Records each call, with what the metadata view said when it came."""

    def __init__(self, metadata: ClusterMetadata) -> None:
        self.metadata = metadata
        self.calls: list[tuple[Any, ...]] = []

    def stop_leading(self) -> None:
        self.calls.append(("stop_leading",))

    def registered_anew(self) -> None:
        self.calls.append(("registered_anew",))

    def brokers_changed(self) -> None:
        self.calls.append(("brokers_changed", sorted(b.node_id for b in self.metadata.brokers())))

    def controller_changed(self, node_id: int | None) -> None:
        self.calls.append(("controller_changed", node_id, self.metadata.controller_id))

    def topic_configs_changed(self, topic: str, configs: dict[str, str]) -> None:
        self.calls.append(("topic_configs_changed", topic, configs))
        assert self.metadata.topic_configs(topic) == configs

    def partition_changed(self, topic: str, partition: int) -> None:
        found = self.metadata.partition_state(topic, partition)
        leader = None if found is None else found.leader
        self.calls.append(("partition_changed", topic, partition, leader))

    def topic_deleted(self, topic: str, partitions: list[int]) -> None:
        self.calls.append(("topic_deleted", topic, sorted(partitions)))
        assert self.metadata.assignment(topic) is None

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [call for call in self.calls if call[0] == name]


class Scene:
    def __init__(self) -> None:
        self.store = FakeStore()
        self.metadata = ClusterMetadata()
        self.listener = Listener(self.metadata)
        self.now_ms = 100_000
        self.membership = Membership(
            MembershipConfig(NODE, "zookeeper:2181", 6000, 6000),
            self.metadata,
            self.listener,
            lambda topic: False,
            lambda: 1_700_000_000_000,
            lambda: self.now_ms,
            open_store=lambda *args, **kwargs: self.store,
        )

    async def joined(self) -> None:
        await self.membership.connect(ZooKeeperSecurity())
        await self.membership.join(BrokerRegistration(NODE, "127.0.0.1", 9092))
        assert await self.membership.wait_caught_up(5.0)

    async def settle(self) -> None:
        """Let what the watches handed to the loop, and the jobs it started, run."""
        for _ in range(20):
            await asyncio.sleep(0.01)


def run(scenario: Callable[[Scene], Coroutine[Any, Any, None]]) -> None:
    async def main() -> None:
        scene = Scene()
        try:
            await scenario(scene)
        finally:
            await scene.membership.stop_following()
            await scene.membership.leave()

    asyncio.run(main())


def test_joining_fills_the_view_then_tells_the_listener_of_every_partition() -> None:
    async def scenario(scene: Scene) -> None:
        await scene.joined()
        assert scene.store.registered == [1]
        assert scene.metadata.is_live(NODE) and scene.metadata.is_live(OTHER)
        assert scene.metadata.controller_id == OTHER
        listener = scene.listener
        assert listener.named("topic_configs_changed") == [
            ("topic_configs_changed", TOPIC, {"retention.ms": "1000"})
        ]
        # Each partition when the assignment came, and again when its state did: the
        # view had the state by then.
        assert ("partition_changed", TOPIC, 0, NODE) in listener.calls
        assert ("partition_changed", TOPIC, 1, OTHER) in listener.calls
        assert scene.membership.followed_topics() == [TOPIC]
        assert scene.membership.topic_names_known

    run(scenario)


def test_a_changed_partition_state_reaches_the_view_before_the_listener() -> None:
    async def scenario(scene: Scene) -> None:
        await scene.joined()
        scene.listener.calls.clear()
        scene.store.fire(("state", TOPIC, 1), Versioned(state(NODE, epoch=1), 1))
        await scene.settle()
        assert scene.listener.calls == [("partition_changed", TOPIC, 1, NODE)]
        assert scene.metadata.partition_state(TOPIC, 1) == state(NODE, epoch=1)

    run(scenario)


def test_a_deleted_topic_is_forgotten_with_its_watches() -> None:
    async def scenario(scene: Scene) -> None:
        await scene.joined()
        scene.listener.calls.clear()
        scene.store.fire("topics", set())
        await scene.settle()
        assert scene.listener.calls == [("topic_deleted", TOPIC, [0, 1])]
        assert scene.membership.followed_topics() == []
        for key in [("topic", TOPIC), ("config", TOPIC), ("state", TOPIC, 0)]:
            assert not scene.store.watching(key), key

    run(scenario)


def test_brokers_and_controller_changes_are_told_after_the_view_has_them() -> None:
    async def scenario(scene: Scene) -> None:
        await scene.joined()
        scene.listener.calls.clear()
        del scene.store.brokers[OTHER]
        scene.store.fire("brokers", [NODE])
        scene.store.fire("controller", None)
        await scene.settle()
        assert scene.listener.named("brokers_changed") == [("brokers_changed", [NODE])]
        assert scene.listener.named("controller_changed") == [("controller_changed", None, -1)]

    run(scenario)


def test_a_lost_session_stops_leading_and_a_new_one_registers_and_reads_again() -> None:
    async def scenario(scene: Scene) -> None:
        await scene.joined()
        assert scene.membership.lease_valid()
        scene.listener.calls.clear()
        scene.store.session_changed(SessionState.LOST)
        await scene.settle()
        assert scene.listener.calls == [("stop_leading",)]
        assert not scene.membership.lease_valid()
        # A new session: registered again (a new broker epoch), and everything read again
        # because watches that did not fire kept their old values.
        scene.listener.calls.clear()
        scene.store.session_id = 2
        scene.store.states[(TOPIC, 0)] = state(OTHER, epoch=1)
        scene.store.session_changed(SessionState.CONNECTED)
        await scene.settle()
        assert scene.store.registered == [1, 2]
        assert scene.listener.calls[0] == ("registered_anew",)
        assert scene.listener.named("brokers_changed")
        assert ("partition_changed", TOPIC, 0, OTHER) in scene.listener.calls
        assert scene.membership.lease_valid()

    run(scenario)


def test_reconnecting_within_the_same_session_registers_nothing_again() -> None:
    async def scenario(scene: Scene) -> None:
        await scene.joined()
        scene.listener.calls.clear()
        scene.store.session_changed(SessionState.SUSPENDED)
        scene.store.session_changed(SessionState.CONNECTED)
        await scene.settle()
        assert scene.store.registered == [1]
        assert scene.listener.calls == []

    run(scenario)


def test_the_lease_is_valid_only_before_its_deadline_on_the_given_clock() -> None:
    async def scenario(scene: Scene) -> None:
        await scene.joined()
        scene.store.deadline = 110.0
        scene.now_ms = 109_999
        assert scene.membership.lease_valid()
        assert scene.metadata.controller_id == OTHER
        scene.now_ms = 110_000
        assert not scene.membership.lease_valid()

    run(scenario)


def test_leaving_stops_leading_before_the_session_ends() -> None:
    async def scenario(scene: Scene) -> None:
        await scene.joined()
        scene.listener.calls.clear()
        await scene.membership.stop_following()
        assert not scene.store.closed
        await scene.membership.leave()
        assert scene.listener.calls == [("stop_leading",)]
        assert scene.store.closed
        assert not scene.store.watching("topics")

    run(scenario)

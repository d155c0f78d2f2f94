"""ClusterStore against a real ZooKeeper server: Kafka's znodes, conditional writes,
registrations and watches."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient

from herdless.cluster import layout
from herdless.cluster.errors import (
    BrokerIdInUse,
    ClusterUnavailable,
    ControllerMoved,
    StateVersionConflict,
    TopicExists,
    TopicNameCollision,
    UnknownTopic,
)
from herdless.cluster.layout import (
    BrokerRegistration,
    LogDirEvent,
    PartitionState,
    TopicAssignment,
)
from herdless.cluster.store import ClusterStore, SessionState
from tests.cluster.conftest import CLOCKS, OpenStore, Recorder, expire_session
from tests.support.broker import free_port
from tests.support.zookeeper import ZooKeeperProcess

BROKER_1 = BrokerRegistration(1, "127.0.0.1", 9092, "rack-a")
BROKER_2 = BrokerRegistration(2, "127.0.0.1", 9093, "rack-b")


def topic(name: str = "t", partitions: int = 2) -> TopicAssignment:
    return TopicAssignment(name, uuid.uuid4(), {p: (1, 2) for p in range(partitions)})


def test_cluster_id_is_created_once_in_kafkas_format(
    open_store: OpenStore, raw: KazooClient
) -> None:
    first, second = open_store(), open_store()
    cluster_id = first.cluster_id()
    assert second.cluster_id() == cluster_id
    assert len(cluster_id) == 22
    data, _ = raw.get("/cluster/id")
    assert data == b'{"version":"1","id":"' + cluster_id.encode() + b'"}'


def test_store_creates_kafkas_top_level_paths(open_store: OpenStore, raw: KazooClient) -> None:
    for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/admin/delete_topics"):
        data, _ = raw.get(path)
        assert data is None, path


# -- brokers -------------------------------------------------------------------------------


def test_registration_is_an_ephemeral_znode_in_kafkas_format(
    open_store: OpenStore, raw: KazooClient
) -> None:
    store = open_store()
    broker_epoch = store.register_broker(BROKER_1)
    data, stat = raw.get("/brokers/ids/1")
    assert stat.ephemeralOwner == store.session_id
    assert stat.czxid == broker_epoch
    fields = json.loads(data)
    assert fields["version"] == 5 and fields["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert store.live_brokers() == {1: BROKER_1}
    # Registering again in the same session keeps the znode.
    assert store.register_broker(BROKER_1) == broker_epoch


def test_duplicate_broker_id_is_refused_while_its_owner_lives(open_store: OpenStore) -> None:
    owner, intruder = open_store(), open_store()
    owner.register_broker(BROKER_1)
    with pytest.raises(BrokerIdInUse) as info:
        intruder.register_broker(BrokerRegistration(1, "10.0.0.9", 9999))
    assert str(info.value) == (
        "broker id 1 is already registered by a live broker at 127.0.0.1:9092"
    )
    owner.close()
    # The id is free as soon as the owner's session ends.
    intruder.register_broker(BrokerRegistration(1, "10.0.0.9", 9999))
    assert intruder.live_brokers()[1].host == "10.0.0.9"


def test_reregistration_after_session_expiry(open_store: OpenStore, connect: str) -> None:
    store = open_store()
    states: Recorder[SessionState] = Recorder()
    store.add_session_listener(states)
    first_epoch = store.register_broker(BROKER_1)
    first_session = store.session_id
    expire_session(store, connect)
    states.wait_for(lambda s: s is SessionState.LOST)
    states.wait_for(lambda s: s is SessionState.CONNECTED and store.session_id != first_session)
    assert store.live_brokers() == {}
    second_epoch = store.register_broker(BROKER_1)
    assert second_epoch > first_epoch
    assert store.live_brokers() == {1: BROKER_1}
    # In order, and on kazoo's callback thread, not the caller's.
    assert SessionState.CONNECTED in states.values[states.values.index(SessionState.LOST) :]
    assert threading.current_thread().name not in states.threads


def test_watch_brokers_sees_them_come_and_go(open_store: OpenStore) -> None:
    observer, one, two = open_store(), open_store(), open_store()
    seen: Recorder[list[int]] = Recorder()
    observer.watch_brokers(seen)
    assert seen.values == [[]]  # the first call is made before watch_brokers returns
    one.register_broker(BROKER_1)
    two.register_broker(BROKER_2)
    seen.wait_for(lambda ids: ids == [1, 2])
    one.close()
    seen.wait_for(lambda ids: ids == [2])


# -- controller ----------------------------------------------------------------------------


def test_controller_election_and_epoch(open_store: OpenStore, raw: KazooClient) -> None:
    first, second = open_store(), open_store()
    assert first.controller_id() is None
    election = first.try_elect_controller(1)
    assert election is not None and election.epoch == 1
    assert second.try_elect_controller(2) is None
    assert second.controller_id() == 1
    data, stat = raw.get("/controller")
    assert stat.ephemeralOwner == first.session_id
    assert json.loads(data)["brokerid"] == 1
    epoch_data, epoch_stat = raw.get("/controller_epoch")
    assert (epoch_data, epoch_stat.version) == (b"1", election.epoch_version)

    seen: Recorder[int | None] = Recorder()
    second.watch_controller(seen)
    first.close()
    seen.wait_for(lambda controller: controller is None)
    next_election = second.try_elect_controller(2)
    assert next_election is not None and next_election.epoch == 2
    seen.wait_for(lambda controller: controller == 2)


def test_deposed_controllers_writes_are_refused(open_store: OpenStore) -> None:
    old, new = open_store(), open_store()
    old_election = old.try_elect_controller(1)
    assert old_election is not None
    old.create_topic(topic(), {})
    state = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    created = old.create_partition_states("t", {0: state}, old_election.epoch_version)
    # The old controller steps aside (or its /controller vanished): another takes over.
    old.resign_controller(old_election)
    new_election = new.try_elect_controller(2)
    assert new_election is not None and new_election.epoch == 2

    stale = PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=1)
    with pytest.raises(ControllerMoved):
        old.update_partition_state(
            "t", 0, stale, created[0].version, controller_epoch_version=old_election.epoch_version
        )
    with pytest.raises(ControllerMoved):
        old.create_partition_states("t", {1: state}, old_election.epoch_version)
    with pytest.raises(ControllerMoved):
        old.complete_deletion("t", controller_epoch_version=old_election.epoch_version)
    assert new.get_partition_state("t", 0) == created[0]
    assert new.get_partition_state("t", 1) is None

    fresh = PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=2)
    written = new.update_partition_state(
        "t", 0, fresh, created[0].version, controller_epoch_version=new_election.epoch_version
    )
    assert new.get_partition_state("t", 0) == written


def test_stale_partition_state_version_is_refused(open_store: OpenStore) -> None:
    controller, leader = open_store(), open_store()
    election = controller.try_elect_controller(1)
    assert election is not None
    controller.create_topic(topic(), {})
    state = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    [created] = controller.create_partition_states("t", {0: state}, election.epoch_version).values()
    with pytest.raises(StateVersionConflict):
        controller.create_partition_states("t", {0: state}, election.epoch_version)

    # The leader shrinks the ISR against the version it read...
    shrunk = PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)
    after_shrink = leader.update_partition_state("t", 0, shrunk, created.version)
    assert after_shrink.version == created.version + 1
    # ...so the controller's write based on the older read loses, and is no ControllerMoved.
    moved = PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=1)
    with pytest.raises(StateVersionConflict) as info:
        controller.update_partition_state(
            "t", 0, moved, created.version, controller_epoch_version=election.epoch_version
        )
    assert not isinstance(info.value, ControllerMoved)
    # And a leader with a stale view cannot undo the controller's newer decision.
    controller.update_partition_state(
        "t", 0, moved, after_shrink.version, controller_epoch_version=election.epoch_version
    )
    with pytest.raises(StateVersionConflict):
        leader.update_partition_state("t", 0, shrunk, after_shrink.version)
    assert controller.get_partition_state("t", 0).value == moved  # type: ignore[union-attr]


def test_partition_state_bytes_in_zookeeper(open_store: OpenStore, raw: KazooClient) -> None:
    store = open_store()
    election = store.try_elect_controller(1)
    assert election is not None
    store.create_topic(topic(partitions=1), {})
    state = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    store.create_partition_states("t", {0: state}, election.epoch_version)
    data, _ = raw.get("/brokers/topics/t/partitions/0/state")
    assert data == layout.encode_partition_state(state)
    assert raw.get("/brokers/topics/t/partitions/0")[0] is None


# -- topics --------------------------------------------------------------------------------


def test_create_topic_with_configs(open_store: OpenStore, raw: KazooClient) -> None:
    store = open_store()
    assignment = topic("orders", 3)
    store.create_topic(assignment, {"cleanup.policy": "compact"})
    assert store.topic("orders") == layout.Versioned(assignment, 0)
    assert store.topic("missing") is None
    assert store.topic_names() == {"orders"}
    assert store.topic_config("orders") == {"cleanup.policy": "compact"}
    assert raw.get("/brokers/topics/orders")[0] == layout.encode_topic(assignment)
    assert raw.get("/config/topics/orders")[0] == (
        b'{"version":1,"config":{"cleanup.policy":"compact"}}'
    )
    with pytest.raises(TopicExists, match="Topic 'orders' already exists."):
        store.create_topic(topic("orders"), {})


def test_colliding_topic_names_are_refused(open_store: OpenStore) -> None:
    store = open_store()
    store.create_topic(topic("a.b"), {})
    with pytest.raises(TopicNameCollision, match="collides with existing topics: a.b"):
        store.create_topic(topic("a_b"), {})


def test_set_partitions_is_conditional(open_store: OpenStore) -> None:
    store = open_store()
    assignment = topic("t", 1)
    store.create_topic(assignment, {})
    grown = TopicAssignment("t", assignment.topic_id, {0: (1, 2), 1: (2, 1)})
    assert store.set_partitions(grown, 0) == 1
    with pytest.raises(StateVersionConflict):
        store.set_partitions(assignment, 0)
    assert store.topic("t") == layout.Versioned(grown, 1)
    with pytest.raises(UnknownTopic):
        store.set_partitions(topic("nope"), 0)


def test_topic_watches(open_store: OpenStore) -> None:
    writer, watcher = open_store(), open_store()
    names: Recorder[set[str]] = Recorder()
    assignments: Recorder[layout.Versioned[TopicAssignment] | None] = Recorder()
    configs: Recorder[dict[str, str]] = Recorder()
    watcher.watch_topic_names(names)
    watcher.watch_topic("t", assignments)
    config_watch = watcher.watch_topic_config("t", configs)
    assert (names.values, assignments.values, configs.values) == ([set()], [None], [{}])

    assignment = topic("t", 1)
    writer.create_topic(assignment, {"retention.ms": "1000"})
    names.wait_for(lambda n: n == {"t"})
    assignments.wait_for(lambda a: a is not None and a.value == assignment)
    configs.wait_for(lambda c: c == {"retention.ms": "1000"})

    grown = TopicAssignment("t", assignment.topic_id, {0: (1, 2), 1: (2, 1)})
    writer.set_partitions(grown, 0)
    assignments.wait_for(lambda a: a is not None and a.version == 1 and a.value == grown)

    config_watch.cancel()
    writer.set_topic_config("t", {"retention.ms": "2000"})
    assert writer.topic_config("t") == {"retention.ms": "2000"}
    time.sleep(0.3)
    assert configs.last == {"retention.ms": "1000"}


def test_partition_state_watch(open_store: OpenStore) -> None:
    controller, follower = open_store(), open_store()
    election = controller.try_elect_controller(1)
    assert election is not None
    controller.create_topic(topic(partitions=1), {})
    seen: Recorder[layout.Versioned[PartitionState] | None] = Recorder()
    follower.watch_partition_state("t", 0, seen)
    state = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    created = controller.create_partition_states("t", {0: state}, election.epoch_version)[0]
    seen.wait_for(lambda s: s == created)
    newer = PartitionState(leader=2, leader_epoch=1, isr=(2,), controller_epoch=1)
    controller.update_partition_state(
        "t", 0, newer, 0, controller_epoch_version=election.epoch_version
    )
    seen.wait_for(lambda s: s == layout.Versioned(newer, 1))


def test_malformed_znode_in_a_watch_is_skipped_not_fatal(
    open_store: OpenStore, raw: KazooClient
) -> None:
    store = open_store()
    seen: Recorder[int | None] = Recorder()
    store.watch_controller(seen)
    raw.create("/controller", b"garbage", ephemeral=True)
    raw.delete("/controller")
    raw.create("/controller", layout.encode_controller(5, 0), ephemeral=True)
    seen.wait_for(lambda controller: controller == 5)
    assert all(value in (None, 5) for value in seen.values)


# -- deletion ------------------------------------------------------------------------------


def test_topic_deletion(open_store: OpenStore, raw: KazooClient) -> None:
    store = open_store()
    election = store.try_elect_controller(1)
    assert election is not None
    pending: Recorder[set[str]] = Recorder()
    store.watch_pending_deletions(pending)
    store.create_topic(topic("doomed", 2), {"retention.ms": "5"})
    state = PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)
    store.create_partition_states("doomed", {0: state, 1: state}, election.epoch_version)

    store.mark_for_deletion("doomed")
    store.mark_for_deletion("doomed")  # twice is fine, as in Kafka
    assert store.pending_deletions() == {"doomed"}
    pending.wait_for(lambda names: names == {"doomed"})
    assert raw.get("/admin/delete_topics/doomed")[0] is None
    with pytest.raises(TopicExists, match="marked for deletion"):
        store.create_topic(topic("doomed"), {})
    with pytest.raises(UnknownTopic):
        store.mark_for_deletion("never-was")

    store.complete_deletion("doomed", controller_epoch_version=election.epoch_version)
    assert store.topic("doomed") is None
    assert store.topic_config("doomed") == {}
    assert store.pending_deletions() == set()
    assert raw.exists("/brokers/topics/doomed") is None
    pending.wait_for(lambda names: names == set())
    # The name is free again.
    store.create_topic(topic("doomed"), {})


# -- log directory events ------------------------------------------------------------------


def test_log_dir_events_in_kafkas_layout(open_store: OpenStore, raw: KazooClient) -> None:
    store = open_store()
    broker_epoch = store.register_broker(BROKER_1)
    assert store.broker_epochs() == {1: broker_epoch}
    assert raw.get("/log_dir_event_notification")[0] is None
    seen: Recorder[list[str]] = Recorder()
    store.watch_log_dir_events(seen)
    first = store.propagate_log_dir_event(1, LogDirEvent.FAILURE)
    second = store.propagate_log_dir_event(1, LogDirEvent.ONLINE)
    assert (first, second) == ("log_dir_event_0000000000", "log_dir_event_0000000001")
    data, _ = raw.get(f"/log_dir_event_notification/{first}")
    assert data == b'{"version":1,"broker":1,"event":1}'
    seen.wait_for(lambda names: sorted(names) == [first, second])
    assert store.log_dir_event_names() == [first, second]
    event = store.log_dir_event(first)
    assert event is not None
    assert (event.broker_id, event.event) == (1, LogDirEvent.FAILURE)
    # Written after the registration: of this life of the broker.
    assert event.zxid > broker_epoch

    # Only a controller deletes them, and one deleted already is no error.
    election = store.try_elect_controller(1)
    assert election is not None
    raw.delete(f"/log_dir_event_notification/{first}")
    with pytest.raises(ControllerMoved):
        store.delete_log_dir_events([second], election.epoch_version - 1)
    store.delete_log_dir_events([first, second], election.epoch_version)
    assert store.log_dir_event_names() == []
    assert store.log_dir_event(second) is None
    deadline = time.monotonic() + 10
    while seen.last and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen.last == []


# -- connecting ----------------------------------------------------------------------------


def test_chroot_is_created_and_holds_the_layout(zookeeper: ZooKeeperProcess) -> None:
    chroot = f"/herdless-{uuid.uuid4().hex[:8]}/prod"
    with ClusterStore(zookeeper.connect + chroot, **CLOCKS, session_timeout=2.0) as store:
        store.register_broker(BROKER_1)
        root = KazooClient(hosts=zookeeper.connect)
        root.start(timeout=10)
        try:
            assert root.get_children(f"{chroot}/brokers/ids") == ["1"]
            assert root.exists("/brokers/ids/1") is None
        finally:
            root.stop()
            root.close()


def test_unreachable_zookeeper_fails_in_bounded_time() -> None:
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(ClusterUnavailable, match=f"could not connect to ZooKeeper at {address}"):
        ClusterStore(address, **CLOCKS, connect_timeout=1.0)
    assert time.monotonic() - started < 5.0


# -- producer ids ----------------------------------------------------------------------------


def test_producer_id_blocks_never_overlap_across_brokers(
    open_store: OpenStore, raw: KazooClient
) -> None:
    stores = [open_store() for _ in range(3)]
    blocks: list[tuple[int, int]] = []
    lock = threading.Lock()

    def reserve(store: ClusterStore, broker_id: int) -> None:
        for _ in range(10):
            block = store.reserve_producer_id_block(broker_id, 100)
            with lock:
                blocks.append(block)

    threads = [threading.Thread(target=reserve, args=(s, i)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    blocks.sort()
    assert blocks == [(start, start + 100) for start in range(0, 3000, 100)]
    data, _ = raw.get("/latest_producer_id_block")
    assert json.loads(data)["block_end"] == "2999"

"""Fetching from the closest replica (KIP-392), driven by hand: which replica a leader
sends a consumer to, and what a follower serves a consumer.

Kafka's rules, from ReplicaManager.findPreferredReadReplica and RackAwareReplicaSelector:
only in-sync replicas that hold the fetch offset are offered; the leader is kept when
it is in the client's rack, or the client names none, or no replica is there. A real
LogManager and ClusterReplicaManager; ZooKeeper's ISR write accepts every write, and
the clock is one number the test moves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from herdless.broker.config import BrokerConfig, ConfigError
from herdless.broker.replication.cluster_replica_manager import ClusterReplicaManager
from herdless.broker.replication.durability import Durability
from herdless.broker.replication.replica_manager import ACKS_ALL, PartitionError
from herdless.broker.replication.replica_selector import (
    RACK_AWARE_SELECTOR,
    ReplicaSelector,
    ReplicaView,
    replica_selector,
    select_rack_aware,
)
from herdless.cluster.layout import BrokerRegistration, PartitionState
from herdless.cluster.metadata_cache import ClusterMetadata
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import build_batch, parse_header
from herdless.storage import LogManager, PartitionLog

TOPIC = "near"
RACKS = {1: "a", 2: "b", 3: "c"}
LAG_MAX_MS = 3000
EPOCH = 4


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def view(node_id: int, rack: str | None, log_end: int = 10, behind_ms: int = 0) -> ReplicaView:
    return ReplicaView(node_id, rack, log_end, behind_ms)


# --- the rack-aware selector ----------------------------------------------------------


def test_a_client_without_a_rack_reads_from_the_leader() -> None:
    leader = view(1, "a")
    assert select_rack_aware("", leader, [leader, view(2, "b")]) == leader


def test_the_leader_is_kept_when_it_is_in_the_clients_rack() -> None:
    leader = view(1, "b")
    assert select_rack_aware("b", leader, [leader, view(2, "b", log_end=20)]) == leader


def test_a_replica_in_the_clients_rack_is_chosen_over_a_leader_elsewhere() -> None:
    leader = view(1, "a")
    assert select_rack_aware("b", leader, [leader, view(2, "b"), view(3, "c")]).node_id == 2


def test_among_replicas_in_the_rack_the_most_caught_up_wins() -> None:
    leader = view(1, "a")
    behind, ahead = view(2, "b", log_end=9), view(3, "b", log_end=10)
    assert select_rack_aware("b", leader, [leader, behind, ahead]) == ahead
    stale, fresh = view(2, "b", behind_ms=900), view(3, "b", behind_ms=100)
    assert select_rack_aware("b", leader, [leader, stale, fresh]) == fresh
    # Alike in every way: the lower broker id, whatever the order they come in.
    twins = [view(3, "b"), view(2, "b")]
    assert select_rack_aware("b", leader, [leader, *twins]).node_id == 2


def test_no_replica_in_the_clients_rack_leaves_the_leader() -> None:
    leader = view(1, "a")
    assert select_rack_aware("z", leader, [leader, view(2, "b"), view(3, None)]) == leader


def test_replica_selector_class_takes_kafkas_names_and_refuses_others() -> None:
    assert replica_selector(None) is None
    assert replica_selector(" ") is None
    assert replica_selector(RACK_AWARE_SELECTOR) is select_rack_aware
    with pytest.raises(ValueError, match="no replica selector 'Nearest'.*RackAwareReplicaSelector"):
        replica_selector("Nearest")
    config = BrokerConfig()
    config.apply_properties({"replica.selector.class": "Nearest"})
    with pytest.raises(ConfigError, match="replica.selector.class"):
        config.validate()
    config.apply_properties({"replica.selector.class": RACK_AWARE_SELECTOR})
    assert config.replica_selector() is select_rack_aware


# --- the leader's choice, and the follower's reads -----------------------------------


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager(tmp_path / "data", high_watermark_follows_log_end=False)
    manager.open(0)
    manager.create_topic(TOPIC, 1, {})
    yield manager
    manager.close()


def racked_metadata(live: tuple[int, ...] = (1, 2, 3)) -> ClusterMetadata:
    metadata = ClusterMetadata()
    metadata.set_brokers([BrokerRegistration(b, "127.0.0.1", 9090 + b, RACKS[b]) for b in live])
    return metadata


class Replica:
    """Broker `node_id` hosting TOPIC-0 with replicas 1, 2, 3 all in sync, led by 1."""

    def __init__(
        self,
        logs: LogManager,
        node_id: int,
        selector: ReplicaSelector | None = select_rack_aware,
        metadata: ClusterMetadata | None = None,
    ) -> None:
        self.clock = Clock()
        self.replicas = ClusterReplicaManager(
            logs,
            Durability(self.clock),
            self.clock,
            node_id,
            metadata or racked_metadata(),
            lambda: True,
            self._write_isr,
            LAG_MAX_MS,
            monotonic_clock=self.clock,
            replica_selector=selector,
        )
        partition_log = logs.partition(TOPIC, 0)
        assert partition_log is not None
        self.log: PartitionLog = partition_log
        self.replicas.apply_state(
            partition_log, PartitionState(1, EPOCH, (1, 2, 3), 1), 0, (1, 2, 3)
        )

    async def _write_isr(self, topic: str, index: int, state: PartitionState, version: int) -> int:
        return version + 1

    def append(self, count: int = 1) -> int:
        """`count` records appended as the leader; the log end offset after them."""
        for _ in range(count):
            batch = memoryview(build_batch([(b"k", b"v")], self.clock()))
            self.replicas.append(self.log, [(parse_header(batch), batch)], ACKS_ALL)
        return self.log.log_end_offset

    def followers_fetch(self, offset: int, followers: tuple[int, ...] = (2, 3)) -> None:
        for follower in followers:
            self.replicas.record_follower_fetch(TOPIC, 0, follower, offset, 0)

    def preferred(self, client_rack: str, fetch_offset: int = 0) -> int | None:
        return self.replicas.preferred_read_replica(self.log, client_rack, fetch_offset)


def test_the_leader_sends_a_consumer_to_the_in_sync_replica_in_its_rack(logs: LogManager) -> None:
    async def main() -> None:
        leader = Replica(logs, 1)
        end = leader.append(3)
        leader.followers_fetch(end)
        assert leader.preferred("b") == 2
        assert leader.preferred("c", fetch_offset=end) == 3
        assert leader.preferred("a") is None, "the leader is in rack a itself"
        assert leader.preferred("") is None, "a client without a rack stays with the leader"

    asyncio.run(main())


def test_a_replica_without_the_fetch_offset_is_not_offered(logs: LogManager) -> None:
    """A follower that has fetched only up to 2 cannot serve a consumer at offset 3 yet."""

    async def main() -> None:
        leader = Replica(logs, 1)
        leader.append(3)
        leader.followers_fetch(2)
        assert leader.preferred("b", fetch_offset=2) == 2
        assert leader.preferred("b", fetch_offset=3) is None

    asyncio.run(main())


def test_a_replica_out_of_the_isr_is_never_offered(logs: LogManager) -> None:
    """Follower 2 stops fetching and leaves the ISR: its rack's consumers go back to the
    leader, and stay there while it is out."""

    async def main() -> None:
        leader = Replica(logs, 1)
        end = leader.append(2)
        leader.followers_fetch(end)
        assert leader.preferred("b", end) == 2
        leader.clock.ms += LAG_MAX_MS + 1
        leader.followers_fetch(end, followers=(3,))
        leader.replicas.shrink_lagging()
        await asyncio.sleep(0.01)  # the ISR write completes
        assert leader.replicas.partitions[(TOPIC, 0)].isr == (1, 3)
        assert leader.preferred("b", end) is None
        assert leader.preferred("c", end) == 3

    asyncio.run(main())


def test_a_replica_whose_broker_is_gone_is_not_offered(logs: LogManager) -> None:
    async def main() -> None:
        leader = Replica(logs, 1, metadata=racked_metadata(live=(1, 3)))
        end = leader.append()
        leader.followers_fetch(end)
        assert leader.preferred("b", end) is None

    asyncio.run(main())


def test_without_a_selector_every_consumer_reads_from_the_leader(logs: LogManager) -> None:
    async def main() -> None:
        leader = Replica(logs, 1, selector=None)
        end = leader.append()
        leader.followers_fetch(end)
        assert leader.preferred("b", end) is None

    asyncio.run(main())


def test_a_follower_serves_consumers_of_fetch_v11_fenced_by_its_leader_epoch(
    logs: LogManager,
) -> None:
    async def main() -> None:
        follower = Replica(logs, 2)
        assert follower.replicas.consumer_log(TOPIC, 0, EPOCH, any_replica=True) is follower.log
        assert follower.replicas.consumer_log(TOPIC, 0, -1, any_replica=True) is follower.log
        # A follower sends no one elsewhere: only a leader picks a replica.
        assert follower.preferred("c") is None
        for epoch, error in (
            (EPOCH - 1, ErrorCode.FENCED_LEADER_EPOCH),
            (EPOCH + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
        ):
            with pytest.raises(PartitionError) as raised:
                follower.replicas.consumer_log(TOPIC, 0, epoch, any_replica=True)
            assert raised.value.error_code is error
        # Fetch v10 and older: the leader only, as Kafka (no client metadata).
        with pytest.raises(PartitionError) as raised:
            follower.replicas.consumer_log(TOPIC, 0, EPOCH, any_replica=False)
        assert raised.value.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(main())
